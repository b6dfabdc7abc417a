/**
 * Where the server is in its life, for GET /ready and the drain (docs/operations.md):
 *   loading:  listening, engines loading; every route but /ready and /health answers 503;
 *   ready:    serving;
 *   draining: after SIGTERM or SIGINT: /ready answers 503, the listening socket is closed (new
 *             connections are refused), requests that arrive on open connections get 503 with
 *             `Connection: close`, and the requests already in flight (queued or computing) finish,
 *             up to --shutdown-timeout; a request still unanswered then gets 503 with `Retry-After`;
 *             then the tasks file is flushed, the engines stopped, exit 0.
 */
import { ServerResponse } from 'http';

export type LifeState = 'loading' | 'ready' | 'draining';

/** The server's exit status once an engine has died (docs/operations.md), which /health reports as it goes. */
export const ENGINE_DEAD_EXIT = 70;

export class Lifecycle {
  state: LifeState = 'loading';
  /** The responses of the HTTP requests being answered, until each is sent or its connection closes. */
  private open = new Set<ServerResponse>();
  private idleWaiters: (() => void)[] = [];
  private idleListeners: (() => void)[] = [];

  /** Counts `res` in flight until it closes. */
  track(res: ServerResponse) {
    this.open.add(res);
    res.once('close', () => {
      this.open.delete(res);
      if (this.open.size > 0) return;
      for (const w of this.idleWaiters.splice(0)) w();
      for (const l of this.idleListeners) l();
    });
  }

  get requestsInFlight(): number {
    return this.open.size;
  }

  /** The responses not yet sent, for the drain's deadline. */
  unanswered(): ServerResponse[] {
    return [...this.open];
  }

  /** Calls `listener` each time the last request in flight closes. */
  onIdle(listener: () => void) {
    this.idleListeners.push(listener);
  }

  /** Resolves once no request is in flight. */
  idle(): Promise<void> {
    return this.open.size === 0 ? Promise.resolve() : new Promise((r) => this.idleWaiters.push(r));
  }
}
