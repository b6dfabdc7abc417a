/**
 * Requests in flight, shared by identical bodies, and dropped when nobody waits.
 *
 * The official clients retry timeouts and 5xx with the same body (the
 * TypeScript client times each attempt out at 10 s, so a long state on a CPU
 * can be sent three times). An identical request (same route, body bytes, debug
 * header and cache salt) arriving while the first is computed joins that computation:
 * it gets the same response bytes, and the engine works once.
 *
 * When every client waiting on a computation has gone, and none has come back
 * within DROP_GRACE_MS, it is cancelled: if the engine has not taken it yet it
 * leaves the queue (counted as dropped); if the engine is computing it, it
 * finishes, so that a later retry still joins it. The grace is longer than the
 * official clients' first two backoffs (0.5 s and 1 s, less jitter): without
 * it a retried request waiting behind others was dropped at each timeout and
 * re-queued at the back, and under load never answered. A client that joins
 * after a cancellation was asked for, but before the engine's queue confirmed
 * it, gets a fresh run. A response that arrives while none of its clients is
 * connected (one timed out, its retry not yet sent) is kept for the same grace,
 * for that retry.
 */
import { ClientGoneError } from '../../answering/engine-like';
import { AnsweredFields } from '../ops/access-log';

/** How long work nobody waits for stays wanted (queued work) or kept (a finished response), for a retry. */
export const DROP_GRACE_MS = 1500;

/** A computed response (a 200; errors are thrown): headers and the body's bytes, shared by every joined request. */
export interface SharedResponse {
  headers: Record<string, string>;
  body: string;
  /** What the log and the metrics record of it (ops/access-log.ts). */
  answered?: AnsweredFields;
}

interface Computation {
  promise: Promise<SharedResponse>;
  waiters: number;
  /** How many times its waiters fell to none: a grace that finds another since has been overtaken. */
  emptied: number;
  cancel: AbortController;
  /** The request id of the request that started it. */
  firstRequestId: string;
}

export class InFlight {
  private computations = new Map<string, Computation>();
  /** Requests that joined an identical one in flight. */
  joined = 0;
  /** Computations dropped because every client waiting for them had gone before the engine took them. */
  dropped = 0;

  /**
   * The body itself is in the key, not a digest of it: the map hashes and compares the string for less than a
   * digest costs (bench/README.md, "Front end"), and the body is held while its request is in flight anyway.
   * Route and debug value carry no NUL and the salt goes by its length, so no two requests' keys coincide.
   */
  static key(route: string, debug: string | undefined, rawBody: string, cacheSalt?: string): string {
    const salt = cacheSalt === undefined ? '-' : `${cacheSalt.length}:${cacheSalt}`;
    return `${route}\0${debug ?? ''}\0${salt}\0${rawBody}`;
  }

  /**
   * The response for `key`: joins the computation in flight, or starts one with `compute`.
   * `clientGone` aborts when this request's client disconnects. Resolves with the id of the
   * request whose computation answered.
   */
  async run(key: string, requestId: string, clientGone: AbortSignal, compute: (cancel: AbortSignal) => Promise<SharedResponse>): Promise<{ response: SharedResponse; answeredBy: string }> {
    let joined = this.computations.get(key);
    if (joined) this.joined++;
    else joined = this.start(key, requestId, compute);
    joined.waiters++;
    const leave = () => {
      if (--joined.waiters > 0) return;
      // Cancelled only if nobody came back within the grace: a client that returned and left again starts a grace of its own.
      const emptied = ++joined.emptied;
      setTimeout(() => joined.emptied === emptied && joined.waiters === 0 && joined.cancel.abort(), DROP_GRACE_MS).unref();
    };
    if (clientGone.aborted) leave();
    else clientGone.addEventListener('abort', leave, { once: true });
    try {
      return { response: await joined.promise, answeredBy: joined.firstRequestId };
    } finally {
      clientGone.removeEventListener('abort', leave);
    }
  }

  /** A new computation under `key`, forgotten when it settles (a response nobody received: after the grace). */
  private start(key: string, requestId: string, compute: (cancel: AbortSignal) => Promise<SharedResponse>): Computation {
    const c = { waiters: 0, emptied: 0, cancel: new AbortController(), firstRequestId: requestId } as Computation;
    c.promise = this.computeWhileWanted(c, compute);
    c.promise.then(
      () => (c.waiters === 0 ? setTimeout(() => this.forget(key, c), DROP_GRACE_MS).unref() : this.forget(key, c)),
      () => this.forget(key, c),
    );
    this.computations.set(key, c);
    return c;
  }

  private forget(key: string, c: Computation) {
    if (this.computations.get(key) === c) this.computations.delete(key);
  }

  private async computeWhileWanted(c: Computation, compute: (cancel: AbortSignal) => Promise<SharedResponse>): Promise<SharedResponse> {
    for (;;) {
      try {
        return await compute(c.cancel.signal);
      } catch (e) {
        if (!(e instanceof ClientGoneError)) throw e;
        this.dropped++;
        if (c.waiters === 0) throw e;
        c.cancel = new AbortController();
      }
    }
  }
}
