/**
 * `tqserve decide request.json [--base ...] [--dtype ...] [--threads N] [--tasks-file F]` (or `npm run decide -- ...`):
 * answers one /v1/systemone request file without a server and prints the same response body.
 * Rendering, temperature and task flags are those of the server (see --help there); a
 * --tasks-file is read, never written. Heads fitted on a --head-engine are refused here.
 */
import * as fs from 'fs';
import { EngineCall, EngineLike } from '../answering/engine-like';
import { Engine } from '../engine/engine';
import { Renderer } from '../rendering/renderer';
import { resolveBase } from '../config/bases';
import { engineLoad } from '../config/engine-load';
import { FlagError, Flags, parseFlags } from '../config/flags';
import { Temperatures } from '../rendering/profile';
import { openTasks } from '../tasks/open';
import { refusalLine } from '../tasks/store';
import { HttpError, ValidationError } from '../wire/http-error';
import { rendererFor, temperaturesOf } from '../config/profile-flags';
import { answerSystemOne, SystemOneRequest } from '../answering/systemone';
import { questionNames, toHttpError } from '../answering/http-errors';
import { validate } from '../wire/validation';
import { collectImages } from '../images/collect';
import { NO_IMAGE_ENGINE } from '../images/formats';

/**
 * The server's flags decide cannot honour, and why: it answers one file in this process, without listening, batching,
 * headers, a head or image engine, or a log. Given one, it refuses rather than ignore it. Every other flag it honours:
 * the base, rendering, temperatures, tasks and abstention as the server, and the engine flags through the server's own
 * config/engine-load.ts.
 */
export const FLAGS_DECIDE_REFUSES: Record<string, string> = {
  host: 'decide listens nowhere',
  port: 'decide listens nowhere',
  'batch-tokens': 'decide answers one request: there is no batch to bound',
  'head-engine': 'decide runs no head engine (tasks fitted on one are refused)',
  'image-model': 'decide runs no image engine (requests with images are refused)',
  'image-max-tokens': 'decide runs no image engine',
  'vision-cache-mib': 'decide runs no image engine',
  'debug-readout': 'decide reads no request headers (x-service-debug)',
  'cache-salt-header': 'decide reads no request headers, and its prefix cache lives for one request',
  'cors-origin': 'decide serves no browser',
  'log-level': 'decide keeps no access log (its warnings go to stderr)',
  'log-bodies': 'decide keeps no access log',
  'shutdown-timeout': 'decide has no server to shut down',
  'exit-grace-ms': 'decide has no server to shut down',
  engines: 'decide answers with one engine process, its own',
  'busy-poll-ms': 'decide runs its engine in its own process, one call at a time: no channel between processes, nor a next call, to spin for',
  'calls-in-flight': 'decide asks its engine one call at a time: there is no next call to launch behind one',
};

/** The first flag of argv that decide refuses, as an error naming it and why. */
function refusedFlag(argv: string[]): FlagError | undefined {
  for (const arg of argv) {
    const name = arg.startsWith('--') ? arg.slice(2).split('=')[0] : '';
    if (name in FLAGS_DECIDE_REFUSES) return new FlagError(`--${name} is a server flag decide cannot honour: ${FLAGS_DECIDE_REFUSES[name]}`);
  }
  return undefined;
}

/** The addon in this process, timed like the engine process times it. */
class InProcessEngine implements EngineLike {
  constructor(private engine: Engine) {}

  get contextLimit() {
    return this.engine.info.contextLimit;
  }
  async answer(call: EngineCall) {
    const t0 = performance.now();
    // decide has no image engine: requests with images are refused before they get here.
    const r = await this.engine.answer({ state: call.state, questions: call.questions, wantHidden: call.wantHidden });
    return { answers: r.answers, stateTokens: r.stateTokens, cachedTokens: r.cachedTokens, computedTokens: r.computedTokens, timing: { ...r.timing, engineMs: performance.now() - t0, waitMs: 0, waitedBehindRegistration: false, batchSize: 1 } };
  }
}

/** --tasks-file, read only: its tasks and abstention tasks applied as the server applies them; --abstain-option as the server's. */
function loadTasks(flags: Flags, checkpoint: string, renderer: Renderer, temperatures: Temperatures) {
  const file = flags['tasks-file'];
  const abstention = { enabled: flags.abstention === 'on', defaultOption: flags['abstain-option'] };
  const { book, abstentionBook, store } = openTasks({ file, enabled: flags.tasks === 'on', abstention, checkpoint, profile: renderer.profile, temperatures });
  for (const r of store.refused) console.error(`[tqserve] WARNING: ${refusalLine(r)}`);
  return { taskBook: book, abstentions: abstentionBook };
}

async function answerFile(argv: string[]) {
  const [file, ...rest] = argv;
  if (!file || file.startsWith('--')) {
    console.error('usage: tqserve decide request.json [server flags]   (or: npm run decide -- request.json [server flags])');
    process.exit(2);
  }
  const flags = parseFlags(rest);
  const refused = refusedFlag(rest);
  if (refused) throw refused;
  if (flags.device.includes(',')) throw new FlagError(`--device ${flags.device}: decide answers with one engine, on one device`);
  let body: SystemOneRequest;
  try {
    body = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new HttpError(422, `${file}: not a readable JSON file: ${(e as Error).message}`);
  }
  const problems = validate('systemone', body);
  if (problems.length) throw new ValidationError(problems);
  const found = collectImages(body);
  if (found.images.length || found.problems.length) throw new HttpError(400, NO_IMAGE_ENGINE);
  const base = resolveBase(flags.base, flags['models-dir']);
  if (base.note) console.error(`[tqserve] WARNING: ${base.note}`);
  const renderer = await rendererFor(base, flags);
  // The server's engine options (config/engine-load.ts): the same options, so the same bits (docs/arithmetic.md).
  const engine = await Engine.open(engineLoad(flags, base));
  try {
    const servedName = flags['served-name'] ?? base.profile.servedName;
    const temperatures = temperaturesOf(base.profile.temperatures, flags);
    const names = Object.keys(body.questions);
    const books = loadTasks(flags, base.checkpoint, renderer, temperatures);
    const { response, result } = await answerSystemOne({ engine: new InProcessEngine(engine), renderer, temperatures, servedName, ...books }, body).catch((e) => {
      throw toHttpError(e, questionNames((i) => names[i % names.length]));
    });
    if (result.tasks.length) console.error(`[tqserve] tasks applied: ${result.tasks.join(', ')}`);
    console.log(JSON.stringify(response, null, 2));
  } finally {
    await engine.close();
  }
}

/** `tqserve decide request.json [flags]`: prints the response body; exits 3 for a malformed body, 4 for an engine refusal, 1 otherwise. */
export function decide(argv: string[]): Promise<void> {
  return answerFile(argv).catch((e) => {
    if (e instanceof HttpError) {
      console.log(JSON.stringify({ detail: e.detail }));
      process.exit(e.status === 422 ? 3 : 4);
    }
    console.error(`decide: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  });
}

if (require.main === module) decide(process.argv.slice(2));
