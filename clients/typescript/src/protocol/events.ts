/** A commit event from the stream's fields (docs/protocol.md, "The commit events"). */
import type { CommitEvent } from "../types.js";

export function parseCommitEvent(id: string, fields: readonly string[]): CommitEvent {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i] as string, fields[i + 1] as string);
  const num = (name: string): number => Number(f.get(name) ?? 0);
  return {
    id, session: f.get("session") ?? "", handover: num("handover"), olderLists: num("older_lists"),
    outcome: f.get("outcome") ?? "", added: num("added"), updated: num("updated"),
    deleted: num("deleted"), at: num("at"),
  };
}
