/**
 * The memory API's refusals as the client's errors: the JSON `"error"` member
 * names the class (docs/api.md); without one, the status code decides.
 */
import {
  AccessDenied,
  ERROR_CLASSES,
  HandoverBacklogFull,
  HandoverTooLarge,
  HandoverUnavailable,
  InvalidHandover,
  MemfleetError,
} from "../errors.js";

/** FastAPI's `detail` is a string, or a list of {loc, msg} for a 422. */
function detailText(detail: unknown): string {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((item) => {
      const entry = item as { loc?: unknown[]; msg?: unknown };
      const where = Array.isArray(entry.loc) ? entry.loc.join(".") : "";
      return `${where}: ${String(entry.msg ?? "")}`;
    }).join(", ");
  }
  return detail === undefined ? "" : JSON.stringify(detail);
}

function retryAfter(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header);
  return Number.isFinite(seconds) ? seconds : undefined;
}

/** How long to wait before asking again after `error`: its Retry-After, spread by up
 * to a tenth so callers refused together do not all come back at once; without
 * one, `fallbackMs`. */
export function pauseMs(error: MemfleetError, fallbackMs: number): number {
  if (error.retryAfterS === undefined) return fallbackMs;
  return error.retryAfterS * 1000 * (1 + Math.random() / 10);
}

/** The error for an answer that is not a success (`body`: its JSON, or undefined);
 * `handover`: a 400 or 422 is then the hand-over's InvalidHandover. */
export function errorFor(status: number, body: unknown, retryAfterHeader: string | null,
  handover = false): MemfleetError {
  const record = (typeof body === "object" && body !== null ? body : {}) as
    Record<string, unknown>;
  const detail = detailText(record["detail"]) || `the memory API answered ${status}`;
  const named = record["error"];
  let error: MemfleetError;
  if (typeof named === "string" && Object.hasOwn(ERROR_CLASSES, named)) {
    const ErrorClass = ERROR_CLASSES[named as keyof typeof ERROR_CLASSES];
    error = new ErrorClass(detail);
  } else if (status === 401 || status === 403) {
    error = new AccessDenied(detail);
  } else if (status === 413) {
    error = new HandoverTooLarge(detail);
  } else if (status === 429) {
    error = new HandoverBacklogFull(detail);
  } else if (handover && (status === 400 || status === 422)) {
    error = new InvalidHandover(detail);
  } else if (status >= 500) {
    error = new HandoverUnavailable(detail);
  } else {
    error = new MemfleetError(detail);
  }
  error.status = status;
  const seconds = retryAfter(retryAfterHeader);
  if (seconds !== undefined) error.retryAfterS = seconds;
  return error;
}
