"""`memfleet mcp` over stdio, driven by the `mcp` SDK's own client against the real
memory API and PostgreSQL: the tools are the shared definitions and run through the
executor; the known-facts block as a resource and a prompt; one user per process,
whatever the credential; memory off stores nothing; no credential, one line, exit 2."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from pydantic import AnyUrl

from tests.api_server import token
from tests.integration.mcp.conftest import MEMFLEET, answer, clean_env, new_key, stdio_session
from worker.client import AsyncMemoryApi
from worker.client.memory_tools import memory_tool_definitions
from worker.mcp.server import KNOWN_FACTS_PROMPT, KNOWN_FACTS_URI
from worker.store.service_keys import ServiceKeyStore


async def test_the_tools_and_the_known_facts_over_stdio(
    api_url: str, keys: ServiceKeyStore,
) -> None:
    key = await new_key(keys, "read", "admin")
    async with stdio_session(api_url, "ada", MEMFLEET_SERVICE_KEY=key) as mcp:
        listed = (await mcp.list_tools()).tools
        shared = [d["function"] for d in memory_tool_definitions()]
        assert [t.name for t in listed] == [f["name"] for f in shared]
        assert [t.inputSchema for t in listed] == [f["parameters"] for f in shared]
        assert [t.description for t in listed] == [f["description"] for f in shared]

        saved = answer(await mcp.call_tool("save_memory", {"text": "Keeps bees in Leeds"}))
        fact_id = saved["saved"]["id"]
        listed_facts = answer(await mcp.call_tool("list_memory", {}))
        assert [f["id"] for f in listed_facts["facts"]] == [fact_id]
        found = answer(await mcp.call_tool("search_memory", {"query": "bees"}))
        assert found["results"][0]["id"] == fact_id

        resource = await mcp.read_resource(AnyUrl(KNOWN_FACTS_URI))
        assert "Keeps bees in Leeds" in resource.contents[0].text  # type: ignore[union-attr]
        assert [r.uri for r in (await mcp.list_resources()).resources] == [
            AnyUrl(KNOWN_FACTS_URI)]
        prompt = await mcp.get_prompt(KNOWN_FACTS_PROMPT, {"message": "my hobby?"})
        assert "Keeps bees in Leeds" in prompt.messages[0].content.text  # type: ignore[union-attr]

        bad = await mcp.call_tool("save_memory", {"text": "x", "user_id": "bob"})
        assert bad.isError and answer(bad)["error"] == "bad_arguments"

        assert answer(await mcp.call_tool("forget_memory", {"fact_id": fact_id}))["ok"]
        assert answer(await mcp.call_tool("list_memory", {}))["count"] == 0
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        chain = await api.fact_chain("ada", fact_id)  # forget supersedes, never deletes
        assert chain.versions[0].superseded_at is not None
        assert chain.versions[0].source_kind == "manual"


async def test_one_user_per_process_whatever_the_credential(
    api_url: str, keys: ServiceKeyStore,
) -> None:
    key = await new_key(keys, "read", "admin")
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        await api.add_fact("bob", "Bob's door code is 4321")
    # ada's own token: her memory, none of bob's
    async with stdio_session(api_url, "ada", MEMFLEET_USER_TOKEN=token("ada")) as mcp:
        assert answer(await mcp.call_tool("save_memory", {"text": "Likes tea"}))["ok"]
        texts = [f["text"] for f in answer(await mcp.call_tool("list_memory", {}))["facts"]]
        assert texts == ["Likes tea"]
        found = answer(await mcp.call_tool("search_memory", {"query": "door code"}))
        assert all("4321" not in r["text"] for r in found["results"])
        block = (await mcp.read_resource(AnyUrl(KNOWN_FACTS_URI))).contents[0]
        assert "4321" not in block.text  # type: ignore[union-attr]
    # ada's token named for bob: refused at start, one line, exit 2, nothing served
    done = await asyncio.to_thread(
        subprocess.run, [MEMFLEET, "mcp", "--user", "bob", "--api-url", api_url],
        env=clean_env(MEMFLEET_USER_TOKEN=token("ada")), capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith("memfleet: `memfleet mcp` cannot act for --user: ")
    assert "403" in line or "refused" in line or "denied" in line.lower(), line
    assert "bob" not in line and token("ada") not in line
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        assert [f.text for f in (await api.facts("bob", scope="all")).facts] == [
            "Bob's door code is 4321"]


async def test_memory_off_saves_nothing_over_stdio(api_url: str, keys: ServiceKeyStore) -> None:
    key = await new_key(keys, "read", "admin")
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        await api.set_consent("cy", False)
    async with stdio_session(api_url, "cy", MEMFLEET_SERVICE_KEY=key) as mcp:
        saved = await mcp.call_tool("save_memory", {"text": "PIN is 1234"})
        assert saved.isError and answer(saved)["error"] == "memory_off"
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        assert (await api.facts("cy", scope="all")).count == 0


def test_no_credential_is_one_line_and_exit_2() -> None:
    done = subprocess.run([MEMFLEET, "mcp", "--user", "ada", "--api-url",
                           "http://127.0.0.1:9"], env=clean_env(), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfleet: ")
    assert "MEMFLEET_SERVICE_KEY" in lines[0] and "MEMFLEET_USER_TOKEN" in lines[0]


async def test_a_refused_or_unanswered_credential_ends_it_at_start(
    api_url: str, keys: ServiceKeyStore,
) -> None:
    """Checked before serving: a revoked or forged key, or an API that does not answer,
    is one line and exit 2, never a server whose every call fails."""
    key = await new_key(keys, "read", "admin")
    forged = key[:-4] + ("0000" if not key.endswith("0000") else "1111")
    for env, url in ((dict(MEMFLEET_SERVICE_KEY=forged), api_url),
                     (dict(MEMFLEET_SERVICE_KEY=key), "http://127.0.0.1:9")):
        done = await asyncio.to_thread(
            subprocess.run, [MEMFLEET, "mcp", "--user", "ada", "--api-url", url],
            env=clean_env(**env), capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith("memfleet: `memfleet mcp` cannot act for --user: "), line
        assert key[-20:] not in line and forged[-20:] not in line


def test_without_the_mcp_extra_it_says_which_in_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "mcp"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n")
    done = subprocess.run([MEMFLEET, "mcp", "--user", "ada", "--api-url",
                           "http://127.0.0.1:9"],
                          env=clean_env(PYTHONPATH=str(tmp_path), MEMFLEET_SERVICE_KEY="mfk_x"),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "memfleet: `memfleet mcp` needs the mcp extra (mcp is missing): "
        "pip install 'memfleet[mcp]'"]
