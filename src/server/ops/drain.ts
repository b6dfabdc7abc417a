/**
 * SIGTERM and SIGINT (docs/operations.md): the drain. /ready turns 503 and the listening socket
 * closes (new connections are refused; a request on an open keep-alive connection gets 503 with
 * `Connection: close`); the requests in flight, computing or queued for the engine, finish, for
 * at most --shutdown-timeout seconds; the tasks file is flushed; the engines are stopped; exit 0.
 * A second signal exits at once (code 1). While loading, a signal stops the engines and exits 0.
 */
import { Server } from 'http';
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
  if (!finished) d.logger.warn({ requests_in_flight: d.lifecycle.requestsInFlight }, `--shutdown-timeout reached: ${d.lifecycle.requestsInFlight} requests unfinished`);
  await d.loaded?.tasks.flush();
  for (const e of d.loaded?.engines ?? []) e.client.stop();
  d.server.closeAllConnections();
  d.logger.info({ duration_ms: Math.round(performance.now() - t0), finished }, 'drained: exiting');
}
