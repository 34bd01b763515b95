"""The TypeScript chat-turn example (clients/typescript/src/examples/chat_turn.ts) run by
node against the real memory API and the LLM stub as its model: the prompt split (the
stable block first, the same bytes every turn without a commit that changes it, the
volatile block after it; revalidated with a 304) and the memory tools (a scripted
save_memory run through MemoryToolExecutor)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.typescript_node import node_fleet, require_build, run_node
from worker.client.memory_tools import memory_tool_definitions
from worker.config import Settings
from worker.read_split import VOLATILE_HEADER

USER = "ts-chat-turn"


async def test_the_typescript_chat_turn_splits_the_prompt_and_runs_the_tools(
    settings: Settings, stub: StubServer, tmp_path: Path,
) -> None:
    require_build()
    # A stable block of one fact: the most important one.
    async with node_fleet(settings, stub, tmp_path, read_stable_max_facts=1) as env:
        admin = {"Authorization": f"Bearer {env['MEMFLEET_TEST_ADMIN_KEY']}"}
        async with httpx.AsyncClient(base_url=env["MEMFLEET_TEST_API_URL"],
                                     headers=admin, timeout=30) as api:
            for text, importance in (("Lives in Lisbon", 9), ("Has a dog named Rex", 3)):
                added = await api.post(f"/users/{USER}/facts",
                                       json={"text": text, "importance": importance})
                assert added.status_code == 201, added.text
            stub.script(
                {"tool_calls": [{"name": "save_memory",
                                 "arguments": {"text": "Likes green tea",
                                               "category": "preference"}}]},
                {"content": "Noted."}, {"content": "Green tea."}, {"content": "Rex, yes."})
            done = await asyncio.to_thread(
                run_node, ["clients/typescript/dist/examples/chat_turn.js", USER,
                           "Remember that I like green tea.", "What tea should I drink?",
                           "How is my dog?"],
                {**env, "MEMFLEET_API_URL": env["MEMFLEET_TEST_API_URL"],
                 "MEMFLEET_SERVICE_KEY": env["MEMFLEET_TEST_ADMIN_KEY"],
                 "MEMFLEET_CHAT_MODEL_URL": stub.v1, "MEMFLEET_CHAT_MODEL": "stub-chat"})
            stable = (await api.get(f"/users/{USER}/stable-block")).json()
            facts = (await api.get(f"/users/{USER}/facts")).text
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert [t["answer"] for t in seen["turns"]] == ["Noted.", "Green tea.", "Rex, yes."]
    assert [t["toolCalls"] for t in seen["turns"]] == [1, 0, 0]
    # The saved fact is less important than the one held: the stable block, and so the
    # cached prefix, is unchanged by it, reused on every turn and revalidated with a 304.
    assert [t["prefixReused"] for t in seen["turns"]] == [True, True, True]
    assert seen["revalidated_304"] is True
    assert "Likes green tea" in facts and "Likes green tea" not in stable["block"]
    bodies = [r["body"] for r in stub.recorded() if r["path"] == CHAT_PATH
              and r["body"].get("model") == "stub-chat"]
    assert len(bodies) == 4  # the first turn's two rounds, then one a turn
    systems = {b["messages"][0]["content"] for b in bodies}
    assert len(systems) == 1, "the prefix is the same bytes on every request"
    [system] = systems
    assert system.endswith(f"\n\n{stable['block']}") and "Lives in Lisbon" in system
    assert all(b["tools"] == memory_tool_definitions() for b in bodies)
    # The volatile block after it: the turn's own facts, not the stable block's.
    volatile = bodies[2]["messages"][1]
    assert volatile["role"] == "system" and volatile["content"].startswith(VOLATILE_HEADER)
    assert "Likes green tea" in volatile["content"]
    assert "Lives in Lisbon" not in volatile["content"]
    [result] = [json.loads(m["content"]) for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert result["ok"] and result["saved"]["text"] == "Likes green tea"
