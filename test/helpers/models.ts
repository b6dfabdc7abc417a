/** Paths of the generated models the tests use (written by test/global-setup.ts). */
import * as path from 'path';
import { modelsDir } from '../../src/testmodels/generate';

export const tinyModel = (name: string) => path.join(modelsDir, name);
/** TorchScript exports of tiny models, made with Debian's python3-torch. */
export const torchscriptModel = (name: string) => path.join(modelsDir, `${name}.torchscript.pt`);
/** The models exported to TorchScript by the global set-up (test/reference/ref_model.py's families), for torchscript.test.ts. */
export const torchscriptModelNames = ['tiny-llama', 'tiny-mistral', 'tiny-qwen3'];
export const debianPython = '/usr/bin/python3';
export const referenceDir = path.resolve(__dirname, '..', 'reference');
