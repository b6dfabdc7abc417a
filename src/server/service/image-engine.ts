/**
 * --image-model: the image engine, a second engine process running a vision-language checkpoint
 * (Qwen2-VL), with its own renderer and temperatures (its abstention book is set once the tasks
 * are open: load-service.ts) and the fingerprint image-route abstention tasks are fitted under; the image route answers
 * with it. It decodes the images it receives (src/images/decode.ts), so only compressed bytes
 * cross the process boundary. Its death is an engine death (503, exit 70).
 */
import { Flags } from '../../config/flags';
import { rendererFor, temperaturesOf } from '../../config/profile-flags';
import { budgetOfTokens, RECIPE_VERSION } from '../../images/preprocess';
import { computeFingerprint } from '../../tasks/fingerprint';
import { EngineClient, StartingEngine } from '../engine-process/client';
import { ImageService } from './service';

/** The image route's service over the image engine (started with the others: start-engines.ts), once it is up. */
export async function imageService(starting: StartingEngine, flags: Flags, servedName: string): Promise<{ service: ImageService; engine: EngineClient; note?: string }> {
  const { base } = starting;
  const renderer = await rendererFor(base, flags);
  if (renderer.profile.layout !== 'state-first') throw new Error('--image-model needs --layout state-first: images belong in the state that every question shares');
  const maxTokens = flags['image-max-tokens'];
  const budget = budgetOfTokens(maxTokens);
  const engine = await starting.client;
  const vision = engine.info.vision;
  if (!vision) throw new Error(`--image-model ${flags['image-model']}: ${base.checkpoint} is ${engine.info.architecture}, not a vision-language model (supported: Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration)`);
  const temperatures = temperaturesOf(base.profile.temperatures, flags);
  const service: ImageService = {
    context: { engine, renderer, temperatures, servedName, imagePadId: vision.imagePadId },
    fingerprint: computeFingerprint({ checkpoint: base.checkpoint, profile: renderer.profile, temperatures, headEngine: null, imageRecipe: `${RECIPE_VERSION} ${JSON.stringify(budget)}`, quantization: flags.quantization }),
    base,
    engineInfo: engine.info,
    budget,
    maxTokens,
    cacheReport: () => engine.cacheReport(),
    engineProcess: { pid: engine.pid, where: `child process ${engine.pid} of server ${process.pid}` },
  };
  return { service, engine, note: base.note };
}
