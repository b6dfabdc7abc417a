/**
 * `tqserve serve [flags]` (`npm start -- [flags]`): listen (answering 503 while loading), start the engine processes,
 * load the rest of the server while they load their models (this file imports only what comes before the engines
 * start; the app and the tasks are imported after: start-engines.ts says why), then serve; drain on SIGTERM/SIGINT
 * (ops/drain.ts). Exit codes: 0 after --help or a drain, 2 for a bad flag, 1 when start-up fails (bad base, busy
 * port) or on a second signal, 70 after an engine process died. Logs are JSON lines on stdout (ops/logger.ts).
 */
import * as http from 'http';
import { FlagError, Flags, helpText, parseFlags } from '../config/flags';
import { NativeEngineInfo } from '../engine/native';
import { answerMalformedRequests } from './http/connection';
import { drainOnSignals, Drainable } from './ops/drain';
import { ENGINE_DEAD_EXIT, Lifecycle } from './ops/lifecycle';
import { reclaimWhenIdle } from './ops/reclaim';
import { answerWhileLoading } from './ops/loading';
import { createLogger, Logger } from './ops/logger';
import type { EngineRole } from './ops/metrics';
import type { Service } from './service/service';
import { startEngines } from './start-engines';
import { loadSharp } from '../images/sharp';

export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** How a death's reason names the engine that died (the serving engine's is unnamed). */
const DEATH_PREFIX: Record<EngineRole, string> = { text: '', head: 'head engine (--head-engine): ', image: 'image engine (--image-model): ' };

function parse(argv: string[]): Flags {
  try {
    return parseFlags(argv);
  } catch (e) {
    if (e instanceof FlagError) {
      console.error(`tqserve: ${e.message}`);
      process.exit(2);
    }
    throw e;
  }
}

/** Listens with the loading answer; exits 1 when the port cannot be had. */
function listen(flags: Flags, logger: Logger): Promise<http.Server> {
  const server = http.createServer(answerWhileLoading);
  // Idle keep-alive connections are kept longer than the proxies and load balancers in front of
  // servers keep theirs (nginx 60 s, AWS ALB 60 s): with Node's 5 s default the server could close
  // a connection just as a client or proxy sent the next request on it, which then failed
  // ("other side closed"). The headers timeout must exceed it (Node's rule).
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1000;
  answerMalformedRequests(server);
  return new Promise((resolve) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      logger.fatal({ code: e.code }, e.code === 'EADDRINUSE' ? `port ${flags.port} on ${flags.host} is already in use` : `cannot listen: ${e.message}`);
      process.exit(1);
    });
    server.listen(flags.port, flags.host, () => resolve(server));
  });
}

/** `tqserve serve [flags]`: runs until drained or an engine dies. */
/** The CPU kernels' level and how it was chosen, for the start-up line: ", kernels avx2 (measured: avx2 95, generic 21 GFLOP/s)". */
function levelNote(e: NativeEngineInfo): string {
  const c = e.levelChoice;
  if (!c) return '';
  const rates = Object.entries(c.gflops).map(([level, gflops]) => `${level} ${Math.round(gflops)}`);
  const busy = c.busy ? ' while the machine was busy, to be measured again' : '';
  const native = e.arithmetic === 'native' ? '; native arithmetic: bf16 on AMX tiles, bits of AMX machines alone' : '';
  return `, kernels ${e.kernels} (${c.how}${busy}${rates.length ? `: ${rates.join(', ')} GFLOP/s` : ''}${native})`;
}

/** A mixture of experts, for the start-up line: ", 8 experts, top 2 (3.3B of 30.5B parameters a token)". */
function expertsNote(e: NativeEngineInfo): string {
  if (!e.moe || !e.parameters || !e.activeParameters) return '';
  const billions = (n: number) => `${(n / 1e9).toFixed(n < 1e8 ? 4 : 1)}B`;
  const shared = e.moe.sharedExpertIntermediateSize ? ' and a shared expert' : '';
  return `, ${e.moe.experts} experts, top ${e.moe.expertsPerToken}${shared} (${billions(e.activeParameters)} of ${billions(e.parameters)} parameters a token)`;
}

export async function serve(argv: string[]) {
  const flags = parse(argv);
  if (flags.help) return console.log(helpText());
  const logger = createLogger(flags['log-level']);
  const lifecycle = new Lifecycle();
  const server = await listen(flags, logger);
  const a = server.address();
  const where = typeof a === 'object' && a ? `${a.address}:${a.port}` : String(a);
  logger.info({ address: where }, `listening at http://${where}; loading the engines (GET /ready answers 503 until they are up)`);
  const drainable: Drainable = { server, lifecycle, logger, timeoutMs: flags['shutdown-timeout'] * 1000 };
  drainOnSignals(drainable);

  let service: Service | undefined;
  const died = (engine: EngineRole) => (reason: string) => {
    const why = DEATH_PREFIX[engine] + reason;
    logger.error({ event: 'engine_died', engine }, `${why}: answering 503 and exiting with code ${ENGINE_DEAD_EXIT}`);
    if (service) service.deadReason = why;
    setTimeout(() => process.exit(ENGINE_DEAD_EXIT), flags['exit-grace-ms']);
  };
  let loaded, modules;
  try {
    const engines = await startEngines(flags, died, logger);
    modules = await Promise.all([import('./load-service'), import('./app'), import('./ops/metrics'), import('./ops/tasks-file')]);
    loaded = await modules[0].loadService(flags, logger, engines);
  } catch (e) {
    logger.fatal(`start-up failed: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  }
  const [, { createApp }, { Metrics }, { watchTasksFile }] = modules;
  service = loaded.service;
  drainable.loaded = { engines: loaded.engines, tasks: service.tasks };
  const metrics = new Metrics(loaded.engines);
  const app = createApp(service, { lifecycle, logger, logBodies: flags['log-bodies'], metrics });
  watchTasksFile(service.tasks, logger, metrics);
  // Requests in flight, counted until their responses are sent (or their connections close), for the drain.
  const handle = app.callback();
  server.removeAllListeners('request');
  server.on('request', (req, res) => {
    lifecycle.track(res);
    handle(req, res);
  });
  reclaimWhenIdle(lifecycle, logger);
  if (lifecycle.state === 'loading') lifecycle.state = 'ready';
  const e = service.engineInfo;
  const weights = e.quantization === 'none' ? '' : `, ${e.quantization} weights (${e.quantizedKernels}) quantized at load in ${Math.round(e.weightsMs)} ms`;
  logger.info({ event: 'ready', model: service.servedName }, `serving ${service.servedName} (${service.base.checkpoint}, ${e.architecture}${expertsNote(e)}, ${e.dtype}${weights}${levelNote(e)}) on http://${where}`);
  const images = service.images;
  if (images) logger.info({ event: 'image_route' }, `image route: ${images.base.checkpoint} (${images.engineInfo.architecture}, ${images.engineInfo.dtype}), at most ${images.maxTokens} tokens per image`);
  if (images) void loadSharp(); // its image headers are read here: now rather than by the first image
}

if (require.main === module) serve(process.argv.slice(2));
