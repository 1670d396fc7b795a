"""Calls an application answers and the outputs that answer them, valid as request items and as reply items."""

from __future__ import annotations

from typing import Any

__all__ = ["CALLS", "OUTPUTS", "answer_key"]

#: What answers each call, minimal, as the application sends it.
OUTPUTS: dict[str, dict[str, Any]] = {
    "function_call": {"type": "function_call_output", "call_id": "x", "output": "ok"},
    "custom_tool_call": {"type": "custom_tool_call_output", "call_id": "x", "output": "ok"},
    "computer_call": {"type": "computer_call_output", "call_id": "x", "output": {"type": "computer_screenshot"}},
    "local_shell_call": {"type": "local_shell_call_output", "id": "x", "output": "ok"},
    "shell_call": {"type": "shell_call_output", "call_id": "x", "output": []},
    "apply_patch_call": {"type": "apply_patch_call_output", "call_id": "x", "status": "completed"},
    "mcp_approval_request": {"type": "mcp_approval_response", "approval_request_id": "x", "approve": True},
}
#: The call each output answers, with every field a reply carries (so it is a valid reply item too).
CALLS: dict[str, dict[str, Any]] = {
    "function_call_output": {"type": "function_call", "call_id": "x", "name": "f", "arguments": "{}"},
    "custom_tool_call_output": {"type": "custom_tool_call", "call_id": "x", "name": "f", "input": "go"},
    "computer_call_output": {
        "type": "computer_call",
        "id": "cu",
        "call_id": "x",
        "action": {"type": "screenshot"},
        "status": "completed",
        "pending_safety_checks": [],
    },
    "local_shell_call_output": {
        "type": "local_shell_call",
        "id": "ls",
        "call_id": "x",
        "status": "completed",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
    },
    "shell_call_output": {
        "type": "shell_call",
        "id": "sh",
        "call_id": "x",
        "status": "completed",
        "action": {"commands": ["ls"]},
    },
    "apply_patch_call_output": {
        "type": "apply_patch_call",
        "id": "ap",
        "call_id": "x",
        "status": "completed",
        "operation": {"type": "delete_file", "path": "a.txt"},
    },
    "mcp_approval_response": {
        "type": "mcp_approval_request",
        "id": "x",
        "name": "f",
        "arguments": "{}",
        "server_label": "s",
    },
}


def answer_key(output_type: str) -> str:
    """The key of an output that names the call it answers."""
    return {"mcp_approval_response": "approval_request_id", "local_shell_call_output": "id"}.get(output_type, "call_id")
