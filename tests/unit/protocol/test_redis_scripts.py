"""worker.protocol.scripts: a script is its shared files' text, then its own."""

from __future__ import annotations

import hashlib

from worker.protocol.scripts import PAYLOAD_MESSAGES, LuaScript


def test_a_script_follows_the_files_it_names() -> None:
    shared = LuaScript(*PAYLOAD_MESSAGES)
    alone = LuaScript("worker.protocol.lua", "enqueue.lua")
    script = LuaScript("worker.protocol.lua", "enqueue.lua", after=[PAYLOAD_MESSAGES])

    assert script.text == shared.text + alone.text
    assert script.sha == hashlib.sha1(script.text.encode()).hexdigest()  # noqa: S324 - Redis's


def test_both_list_comparing_scripts_define_messages_of_once() -> None:
    for script in (LuaScript("worker.protocol.lua", "enqueue.lua", after=[PAYLOAD_MESSAGES]),
                   LuaScript("worker.protocol.lua", "release.lua", after=[PAYLOAD_MESSAGES])):
        assert script.text.count("local function messages_of(") == 1
        assert "messages_of(" in script.text.split("local function messages_of(", 1)[1]
