/**
 * Where the server is in its life, for GET /ready and the drain (docs/operations.md):
 *   loading:  listening, engines loading; every route but /ready and /health answers 503;
 *   ready:    serving;
 *   draining: after SIGTERM or SIGINT: /ready answers 503, the listening socket is closed (new
 *             connections are refused), requests that arrive on open connections get 503 with
 *             `Connection: close`, and the requests already in flight (queued or computing) finish,
 *             up to --shutdown-timeout; then the tasks file is flushed, the engines stopped, exit 0.
 */
export type LifeState = 'loading' | 'ready' | 'draining';

export class Lifecycle {
  state: LifeState = 'loading';
  /** HTTP requests being answered. */
  private inflight = 0;
  private idleWaiters: (() => void)[] = [];

  begin() {
    this.inflight++;
  }

  end() {
    if (--this.inflight === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  get requestsInFlight(): number {
    return this.inflight;
  }

  /** Resolves once no request is in flight. */
  idle(): Promise<void> {
    return this.inflight === 0 ? Promise.resolve() : new Promise((r) => this.idleWaiters.push(r));
  }
}
