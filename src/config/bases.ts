/**
 * Named bases: each a profile with its own served name, temperatures and
 * prompt profile, resolved to a local checkpoint. Where a named base is looked for:
 *   1. <models-dir>/<base name>/ and <models-dir>/<org>--<repo>/
 *   2. the Hugging Face cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub,
 *      models--<org>--<repo>/snapshots/<revision in refs/main, else the newest>/
 * When none is found, the base's tiny random-weight test model is generated and served, and
 * the server says so at start-up and in /health (`random_weights: true`).
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { defaultProfile, PromptProfile, Temperatures } from '../rendering/profile';
import { generateTestModel, modelsDir } from '../testmodels/generate';
import { testModels } from '../testmodels/specs';

export interface BaseProfile {
  name: string;
  servedName: string;
  repo?: string;
  temperatures: Temperatures;
  prompt: PromptProfile;
  testModel?: string;
}

export const namedBases: Record<string, BaseProfile> = {
  'qwen3-0.6b': {
    name: 'qwen3-0.6b',
    servedName: 'tqserve-qwen3-0.6b',
    repo: 'Qwen/Qwen3-0.6B',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    prompt: defaultProfile,
    testModel: 'tiny-qwen3',
  },
  'llama3.2-1b': {
    name: 'llama3.2-1b',
    servedName: 'tqserve-llama3.2-1b',
    repo: 'meta-llama/Llama-3.2-1B-Instruct',
    temperatures: { noul: 1.0, choice: 1.2, score: 1.2 },
    prompt: defaultProfile,
    testModel: 'tiny-llama',
  },
  'mistral-7b': {
    name: 'mistral-7b',
    servedName: 'tqserve-mistral-7b',
    repo: 'mistralai/Mistral-7B-Instruct-v0.2',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.5 },
    // Mistral v0.2's template rejects a system turn: none.
    prompt: { ...defaultProfile, systemTurn: null },
    testModel: 'tiny-mistral',
  },
  'gemma3-1b': {
    name: 'gemma3-1b',
    servedName: 'tqserve-gemma3-1b',
    repo: 'google/gemma-3-1b-it',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    // Gemma 3's template has no system turn of its own: it prefixes the system text to the first user turn.
    prompt: defaultProfile,
    testModel: 'tiny-gemma3',
  },
  'phi4-mini': {
    name: 'phi4-mini',
    servedName: 'tqserve-phi4-mini',
    repo: 'microsoft/Phi-4-mini-instruct',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    prompt: defaultProfile,
    testModel: 'tiny-phi3',
  },
  'olmo2-1b': {
    name: 'olmo2-1b',
    servedName: 'tqserve-olmo2-1b',
    repo: 'allenai/OLMo-2-0425-1B-Instruct',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    prompt: defaultProfile,
    testModel: 'tiny-olmo2',
  },
  'smollm3-3b': {
    name: 'smollm3-3b',
    servedName: 'tqserve-smollm3-3b',
    repo: 'HuggingFaceTB/SmolLM3-3B',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    prompt: defaultProfile,
    testModel: 'tiny-smollm3',
  },
  // Mixtures of experts (csrc/model/moe.h): the compute per token follows the active parameters.
  'qwen3-30b-a3b': {
    name: 'qwen3-30b-a3b',
    servedName: 'tqserve-qwen3-30b-a3b',
    repo: 'Qwen/Qwen3-30B-A3B',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    prompt: defaultProfile,
    testModel: 'tiny-qwen3-moe',
  },
  'mixtral-8x7b': {
    name: 'mixtral-8x7b',
    servedName: 'tqserve-mixtral-8x7b',
    repo: 'mistralai/Mixtral-8x7B-Instruct-v0.1',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    // Mixtral's template, like Mistral v0.2's, rejects a system turn: none.
    prompt: { ...defaultProfile, systemTurn: null },
    testModel: 'tiny-mixtral',
  },
  'qwen1.5-moe-a2.7b': {
    name: 'qwen1.5-moe-a2.7b',
    servedName: 'tqserve-qwen1.5-moe-a2.7b',
    repo: 'Qwen/Qwen1.5-MoE-A2.7B-Chat',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    prompt: defaultProfile,
    testModel: 'tiny-qwen2-moe',
  },
  // A vision-language base, for --image-model.
  'qwen2-vl-2b': {
    name: 'qwen2-vl-2b',
    servedName: 'tqserve-qwen2-vl-2b',
    repo: 'Qwen/Qwen2-VL-2B-Instruct',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    prompt: defaultProfile,
    testModel: 'tiny-qwen2-vl',
  },
  'qwen2.5-vl-3b': {
    name: 'qwen2.5-vl-3b',
    servedName: 'tqserve-qwen2.5-vl-3b',
    repo: 'Qwen/Qwen2.5-VL-3B-Instruct',
    temperatures: { noul: 1.0, choice: 1.0, score: 1.0 },
    prompt: defaultProfile,
    testModel: 'tiny-qwen2.5-vl',
  },
};

export interface ResolvedBase {
  profile: BaseProfile;
  checkpoint: string;
  revision: string | null;
  /** The served model is a generated random-weight test model. */
  randomWeights: boolean;
  note?: string;
}

function hubCache(): string {
  if (process.env.HF_HUB_CACHE) return process.env.HF_HUB_CACHE;
  if (process.env.HF_HOME) return path.join(process.env.HF_HOME, 'hub');
  return path.join(os.homedir(), '.cache', 'huggingface', 'hub');
}

function fromHubCache(repo: string): { dir: string; revision: string } | undefined {
  const root = path.join(hubCache(), `models--${repo.replace('/', '--')}`);
  const snapshots = path.join(root, 'snapshots');
  if (!fs.existsSync(snapshots)) return undefined;
  const ref = path.join(root, 'refs', 'main');
  let revision = fs.existsSync(ref) ? fs.readFileSync(ref, 'utf8').trim() : '';
  if (!revision || !fs.existsSync(path.join(snapshots, revision))) {
    const all = fs.readdirSync(snapshots).sort((a, b) => fs.statSync(path.join(snapshots, b)).mtimeMs - fs.statSync(path.join(snapshots, a)).mtimeMs);
    if (!all.length) return undefined;
    revision = all[0];
  }
  const dir = path.join(snapshots, revision);
  return fs.existsSync(path.join(dir, 'config.json')) ? { dir, revision } : undefined;
}

const isCheckpoint = (dir: string) => fs.existsSync(path.join(dir, 'config.json'));

export function resolveBase(base: string, modelsDirFlag: string): ResolvedBase {
  const named = namedBases[base];
  if (named) {
    for (const dir of [path.join(modelsDirFlag, named.name), path.join(modelsDirFlag, named.repo!.replace('/', '--'))])
      if (isCheckpoint(dir)) return { profile: named, checkpoint: path.resolve(dir), revision: null, randomWeights: false };
    const cached = fromHubCache(named.repo!);
    if (cached) return { profile: named, checkpoint: cached.dir, revision: cached.revision, randomWeights: false };
    const dir = generateTestModel(named.testModel!);
    return {
      profile: named,
      checkpoint: dir,
      revision: null,
      randomWeights: true,
      note: `${named.repo} was not found in ${path.resolve(modelsDirFlag)} or ${hubCache()}; serving the random-weight test model ${named.testModel} instead: its answers are meaningless`,
    };
  }
  if (testModels[base]) {
    const dir = generateTestModel(base, path.join(modelsDir, base));
    return {
      profile: { name: base, servedName: base, temperatures: { noul: 1, choice: 1, score: 1 }, prompt: defaultProfile, testModel: base },
      checkpoint: dir,
      revision: null,
      randomWeights: true,
      note: `${base} is a random-weight test model: its answers are meaningless`,
    };
  }
  if (!fs.existsSync(base)) throw new Error(`--base ${base}: not a named base (${Object.keys(namedBases).join(', ')}), a test model (${Object.keys(testModels).join(', ')}) or an existing checkpoint folder`);
  const dir = path.resolve(base);
  const random = fs.existsSync(path.join(dir, 'tqserve-testmodel.json'));
  return {
    profile: { name: path.basename(dir), servedName: path.basename(dir), temperatures: { noul: 1, choice: 1, score: 1 }, prompt: defaultProfile },
    checkpoint: dir,
    revision: null,
    randomWeights: random,
    note: random ? `${dir} is a random-weight test model: its answers are meaningless` : undefined,
  };
}
