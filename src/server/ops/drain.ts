/**
 * SIGTERM and SIGINT (docs/operations.md): the drain. /ready turns 503 and the listening socket
 * closes (new connections are refused; a request on an open keep-alive connection gets 503 with
 * `Connection: close`); the requests in flight, computing or queued for the engine, finish, for
 * at most --shutdown-timeout seconds; a request still unanswered at that deadline gets 503 with
 * `Retry-After` and a `detail` saying so, sent before any connection closes (a reset would leave the
 * client unsure whether it was answered); the tasks file is flushed; the engines are stopped; exit 0.
 * A second signal exits at once (code 1). While loading, a signal stops the engines and exits 0.
 */
import { Server, ServerResponse } from 'http';
import { TaskStore } from '../../tasks/store';
import { Lifecycle } from './lifecycle';
import { Logger } from './logger';
import { EngineSource } from './metrics';

export interface Drainable {
  server: Server;
  lifecycle: Lifecycle;
  logger: Logger;
  timeoutMs: number;
  /** Set once loaded: the engines to stop and the store to flush. */
  loaded?: { engines: EngineSource[]; tasks: TaskStore };
}

export function drainOnSignals(d: Drainable) {
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) {
      d.logger.warn({ signal }, `second ${signal}: exiting now`);
      process.exit(1);
    }
    drain(d, signal).then(
      () => process.exit(0),
      (e) => {
        d.logger.error({ err: e }, 'drain failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

async function drain(d: Drainable, signal: NodeJS.Signals) {
  const t0 = performance.now();
  d.lifecycle.state = 'draining';
  d.server.close();
  d.server.closeIdleConnections();
  const inflight = d.lifecycle.requestsInFlight;
  d.logger.info({ signal, requests_in_flight: inflight, shutdown_timeout_s: d.timeoutMs / 1000 }, `${signal}: draining ${inflight} requests in flight`);
  let timer: NodeJS.Timeout | undefined;
  const finished = await Promise.race([d.lifecycle.idle().then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), d.timeoutMs)))]);
  clearTimeout(timer);
  if (!finished) {
    const refused = await refuseUnanswered(d.lifecycle.unanswered());
    d.logger.warn({ requests_in_flight: refused }, `--shutdown-timeout reached: ${refused} requests unfinished, answered 503`);
  }
  await d.loaded?.tasks.flush();
  for (const e of d.loaded?.engines ?? []) e.client.stop();
  d.server.closeAllConnections();
  d.logger.info({ duration_ms: Math.round(performance.now() - t0), finished }, 'drained: exiting');
}

export const SHUTDOWN_DETAIL = 'the server is shutting down and --shutdown-timeout ran out before this request was answered: send it again, to another replica';

/** Answers each response not yet begun with 503 and `Connection: close`; resolves once they are written. */
async function refuseUnanswered(responses: ServerResponse[]): Promise<number> {
  const body = JSON.stringify({ detail: SHUTDOWN_DETAIL });
  const sent = responses.map((res) => {
    if (res.headersSent || res.destroyed) return Promise.resolve();
    res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), 'retry-after': '1', connection: 'close' });
    return new Promise<void>((resolve) => {
      res.once('close', resolve);
      res.end(body);
    });
  });
  await Promise.all(sent);
  return responses.length;
}
