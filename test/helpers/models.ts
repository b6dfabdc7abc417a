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
