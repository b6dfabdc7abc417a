/** Paths of the generated models the tests use (written by test/global-setup.ts). */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { modelsDir } from '../../src/testmodels/generate';

export const tinyModel = (name: string) => path.join(modelsDir, name);
/** TorchScript exports of tiny models, made with Debian's python3-torch. */
export const torchscriptModel = (name: string) => path.join(modelsDir, `${name}.torchscript.pt`);
/** The models exported to TorchScript by the global set-up (test/reference/ref_model.py's families), for torchscript.test.ts. */
export const torchscriptModelNames = ['tiny-llama', 'tiny-mistral', 'tiny-qwen3'];
export const debianPython = '/usr/bin/python3';

/**
 * The environment for Debian's python3 to import torch in: with the set-up's lean copy of libtorch_cpu first where
 * there is one (build/lean-torch; docs/build.md, "A lean libtorch_cpu"): the same library less the libraries it names
 * and never calls, which `import torch` would otherwise map and initialize in each of the suite's Python processes
 * (bench/README.md, "Where a start's CPU goes"). The same code runs: no result changes.
 */
export function pythonEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const lean = path.resolve(__dirname, '..', '..', 'build', 'lean-torch');
  const copied = fs.existsSync(lean) && fs.readdirSync(lean).some((f) => f.startsWith('libtorch_cpu.so'));
  return copied ? { ...env, LD_LIBRARY_PATH: [lean, env.LD_LIBRARY_PATH].filter(Boolean).join(':') } : env;
}
export const referenceDir = path.resolve(__dirname, '..', 'reference');

/**
 * Runs f on a scratch copy of the model `dir` whose config.json `edit` changed (the same weights under
 * another setting: the tests that show a setting matters), then removes the copy.
 */
export async function withEditedConfig<T>(dir: string, edit: (config: any) => any, f: (copy: string) => Promise<T>): Promise<T> {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-model-'));
  try {
    fs.cpSync(dir, copy, { recursive: true });
    const file = path.join(copy, 'config.json');
    fs.writeFileSync(file, JSON.stringify(edit(JSON.parse(fs.readFileSync(file, 'utf8')))));
    return await f(copy);
  } finally {
    fs.rmSync(copy, { recursive: true, force: true });
  }
}

/**
 * Runs f on a scratch copy of the model `dir` whose tensors `edit` may change in place (their stored bytes and
 * dtype, tensor by tensor, in every safetensors file), then removes the copy.
 */
export async function withEditedTensors<T>(dir: string, edit: (name: string, data: Buffer, dtype: string) => void, f: (copy: string) => Promise<T>): Promise<T> {
  return withEditedConfig(dir, (c) => c, async (copy) => {
    for (const file of fs.readdirSync(copy).filter((n) => n.endsWith('.safetensors')).map((n) => path.join(copy, n))) {
      const buf = fs.readFileSync(file);
      const n = Number(buf.readBigUInt64LE(0));
      for (const [name, info] of Object.entries<any>(JSON.parse(buf.subarray(8, 8 + n).toString('utf8')))) {
        if (name !== '__metadata__') edit(name, buf.subarray(8 + n + info.data_offsets[0], 8 + n + info.data_offsets[1]), info.dtype);
      }
      fs.writeFileSync(file, buf);
    }
    return f(copy);
  });
}
