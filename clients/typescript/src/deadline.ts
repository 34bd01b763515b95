/** A bound on a call that may otherwise wait on a server that does not answer. */

export class DeadlinePassed extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`);
    this.name = "DeadlinePassed";
  }
}

/** `work`, or DeadlinePassed after `ms`. The work itself is not stopped: the
 * client's own command timeout ends it soon after. */
export async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const passed = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlinePassed(ms)), ms);
  });
  try {
    return await Promise.race([work, passed]);
  } finally {
    clearTimeout(timer);
    work.catch(() => undefined); // a late rejection is nobody's to handle
  }
}

/** `ms` later, or as soon as `signal` aborts (it resolves either way). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
