/**
 * The memory API's refusals as the client's errors: the JSON `"error"` member
 * names the class (docs/api.md); without one, the status code decides.
 */
import {
  AccessDenied,
  WriteConflict,
  ERROR_CLASSES,
  HandoverBacklogFull,
  HandoverTooLarge,
  HandoverUnavailable,
  InvalidHandover,
  InvalidRequest,
  MemfleetError,
  MemoryApiUnavailable,
  NotFound,
  RateLimited,
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

/** The error for an answer that is not a success (`body`: its JSON, or undefined).
 * `handover`: the hand-over's route, whose 400 and 422 are an InvalidHandover, 413 a
 * HandoverTooLarge, 429 a HandoverBacklogFull and 5xx a HandoverUnavailable when the
 * answer names no class; on the other routes they are an InvalidRequest, a
 * RateLimited and a MemoryApiUnavailable. `prefix` goes before the API's reason. */
export function errorFor(status: number, body: unknown, retryAfterHeader: string | null,
  handover = false, prefix = ""): MemfleetError {
  const record = (typeof body === "object" && body !== null ? body : {}) as
    Record<string, unknown>;
  const detail = prefix
    + (detailText(record["detail"]) || `the memory API answered ${status}`);
  const named = record["error"];
  let ErrorClass: new (message: string) => MemfleetError;
  if (typeof named === "string" && Object.hasOwn(ERROR_CLASSES, named)) {
    ErrorClass = ERROR_CLASSES[named as keyof typeof ERROR_CLASSES];
  } else if (status === 401 || status === 403) {
    ErrorClass = AccessDenied;
  } else if (status === 404) {
    ErrorClass = NotFound;
  } else if (status === 409) {
    ErrorClass = WriteConflict;
  } else if (status === 413) {
    ErrorClass = handover ? HandoverTooLarge : InvalidRequest;
  } else if (status === 429) {
    ErrorClass = handover ? HandoverBacklogFull : RateLimited;
  } else if (status === 400 || status === 422) {
    ErrorClass = handover ? InvalidHandover : InvalidRequest;
  } else if (status >= 500) {
    ErrorClass = handover ? HandoverUnavailable : MemoryApiUnavailable;
  } else {
    ErrorClass = MemfleetError;
  }
  const error = new ErrorClass(detail);
  error.status = status;
  const seconds = retryAfter(retryAfterHeader);
  if (seconds !== undefined) error.retryAfterS = seconds;
  return error;
}
