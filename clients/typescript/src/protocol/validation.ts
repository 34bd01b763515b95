/**
 * The checks a hand-over passes before anything is sent (docs/protocol.md, "Ids,
 * text and sizes"), with the reasons the Python client gives
 * (worker/protocol/payload.py, worker/memory_rules.py), word for word: a unit
 * test compares them with fixtures the Python side writes
 * (tests/fixtures/protocol/). A reason names positions, fields and limits,
 * never the text.
 */
import { HandoverTooLarge, InvalidHandover } from "../errors.js";
import type { Limits } from "../limits.js";
import type { Message, Role } from "../types.js";

const ROLES: readonly Role[] = ["user", "assistant", "system", "tool"];

// C0 and C1 control characters but tab, newline and carriage return; ids allow none.
const TEXT_CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/u;
const ID_CONTROL = /[\x00-\x1f\x7f-\x9f]/u;
// Python's str.isspace(), not JavaScript's trim(): "only whitespace" must agree
// with the worker's reading ("\x1c" is blank to Python; "\ufeff" is not).
const PY_SPACE = /^[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/u;

/** Unicode code points, as Python's len() counts them (a lone surrogate is one). */
export function codePoints(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

/** Blank as Python's str.strip() sees it. */
export function isBlank(text: string): boolean {
  return PY_SPACE.test(text);
}

/** Why `text` cannot be stored or handed over, or null (memory_rules.text_fault). */
export function textFault(text: string): string | null {
  if (!text.isWellFormed()) return "is not valid UTF-8 (lone surrogate)";
  if (TEXT_CONTROL.test(text)) return "contains control characters";
  return null;
}

/** Why `value` cannot be a user, session or agent id, or null (memory_rules.id_fault). */
export function idFault(value: unknown, maxChars: number): string | null {
  if (typeof value !== "string" || isBlank(value)) return "must be a non-empty string";
  if (codePoints(value) > maxChars) return `is longer than ${maxChars} characters`;
  const fault = textFault(value);
  if (fault !== null) return fault;
  if (ID_CONTROL.test(value)) return "contains control characters";
  return null;
}

export function checkId(value: unknown, what: string, limits: Limits): string {
  const fault = idFault(value, limits.maxIdChars);
  if (fault !== null) throw new InvalidHandover(`${what} ${fault}`);
  return value as string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The most recent `maxMessages` of a longer list, and of those only the newest
 * whose contents could fit `maxHandoverBytes` (characters are at most bytes):
 * payload.recent_window. Anything but an array comes back as it is.
 */
export function recentWindow(raw: unknown, limits: Limits): unknown {
  if (!Array.isArray(raw)) return raw;
  let list: readonly unknown[] = raw;
  if (list.length > limits.maxMessages) list = list.slice(list.length - limits.maxMessages);
  let chars = 0;
  for (let index = list.length - 1; index >= 0; index--) {
    const item = list[index];
    const content = isRecord(item) ? item["content"] : undefined;
    chars += typeof content === "string" ? codePoints(content) : 0;
    if (chars > limits.maxHandoverBytes) {
      // No window holding this message fits; the newest alone is kept, to be
      // refused with its own error.
      return index < list.length - 1 ? list.slice(index + 1) : list.slice(index);
    }
  }
  return list;
}

/** What pydantic says of one message that is not {role: <role>, content: <string>}. */
function shapeFault(item: unknown): string | null {
  if (!isRecord(item)) return ": Input should be a valid dictionary or instance of Message";
  const faults: string[] = [];
  if (!Object.hasOwn(item, "role")) faults.push("role: Field required");
  else if (!ROLES.includes(item["role"] as Role)) {
    faults.push("role: Input should be 'user', 'assistant', 'system' or 'tool'");
  }
  if (!Object.hasOwn(item, "content")) faults.push("content: Field required");
  else if (typeof item["content"] !== "string") {
    faults.push("content: Input should be a valid string");
  }
  return faults.length > 0 ? faults.join(", ") : null;
}

/**
 * Each message as exactly {role, content} (other members are dropped, as the
 * worker ignores them and the scripts compare messages as text), or
 * InvalidHandover / HandoverTooLarge on the first fault (payload.parse_messages).
 */
export function parseMessages(raw: unknown, limits: Limits): Message[] {
  if (!Array.isArray(raw)) {
    throw new InvalidHandover("messages must be a list of {role, content} objects");
  }
  if (raw.length > limits.maxMessages) {
    throw new InvalidHandover(
      `${raw.length} messages is more than the limit of ${limits.maxMessages}`);
  }
  const messages: Message[] = [];
  raw.forEach((item: unknown, index: number) => {
    const shape = shapeFault(item);
    if (shape !== null) throw new InvalidHandover(`message ${index}: ${shape}`);
    const { role, content } = item as Message;
    if (isBlank(content)) throw new InvalidHandover(`message ${index}: content is empty`);
    const chars = codePoints(content);
    if (chars > limits.maxMessageChars) {
      throw new InvalidHandover(`message ${index}: content is ${chars} characters,`
        + ` over the limit of ${limits.maxMessageChars}`);
    }
    const fault = textFault(content);
    if (fault !== null) throw new InvalidHandover(`message ${index} content ${fault}`);
    const size = Buffer.byteLength(content, "utf8");
    if (size > limits.maxMessageBytes) {
      throw HandoverTooLarge.of(`message ${index}: content`, size, limits.maxMessageBytes);
    }
    messages.push({ role, content });
  });
  return messages;
}

/** listed_at_us is a whole number of microseconds, at least 0. */
export function checkListedAt(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidHandover("listed_at_us must be an integer of at least 0");
  }
  return value;
}
