/**
 * --image-model: the image engine, a second engine process running a vision-language checkpoint
 * (Qwen2-VL), with its own renderer and temperatures (its abstention book is set once the tasks
 * are open: main.ts) and the fingerprint image-route abstention tasks are fitted under; the image route answers
 * with it. It decodes the images it receives (src/images/decode.ts), so only compressed bytes
 * cross the process boundary. Its death is an engine death (503, exit 70).
 */
import { resolveBase } from '../../config/bases';
import { Flags } from '../../config/flags';
import { rendererFor, temperaturesOf } from '../../config/profile-flags';
import { NativeLoadOptions } from '../../engine/native';
import { budgetOfTokens, RECIPE_VERSION } from '../../images/preprocess';
import { computeFingerprint } from '../../tasks/fingerprint';
import { EngineClient } from '../engine-process/client';
import { ImageService } from './service';

export async function startImageEngine(
  name: string,
  flags: Flags,
  load: NativeLoadOptions,
  batchTokens: number,
  servedName: string,
  onDeath: (reason: string) => void,
): Promise<{ service: ImageService; engine: EngineClient; note?: string }> {
  const base = resolveBase(name, flags['models-dir']);
  const renderer = await rendererFor(base, flags);
  if (renderer.profile.layout !== 'state-first') throw new Error('--image-model needs --layout state-first: images belong in the state that every question shares');
  const maxTokens = flags['image-max-tokens'];
  const budget = budgetOfTokens(maxTokens);
  const engine = await EngineClient.start(
    { load: { ...load, path: base.checkpoint, visionCacheMiB: flags['vision-cache-mib'] }, batchTokens, images: { budget, model: base.checkpoint } },
    onDeath,
  );
  const vision = engine.info.vision;
  if (!vision) {
    engine.stop();
    throw new Error(`--image-model ${name}: ${base.checkpoint} is ${engine.info.architecture}, not a vision-language model (supported: Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration)`);
  }
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
