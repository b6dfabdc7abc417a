/** Generates the tiny test models (deterministic; reused when unchanged) and their TorchScript exports. */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { generateTestModel } from '../src/testmodels/generate';
import { tinyModelNames, visionModelNames } from '../src/testmodels/specs';
import { debianPython, referenceDir, torchscriptModel } from './helpers/models';

export default async function globalSetup(): Promise<void> {
  for (const name of visionModelNames) generateTestModel(name);
  for (const name of tinyModelNames) {
    const dir = generateTestModel(name);
    const pt = torchscriptModel(name);
    const stamp = path.join(dir, 'tqserve-testmodel.json');
    if (!fs.existsSync(pt) || fs.statSync(pt).mtimeMs < fs.statSync(stamp).mtimeMs) {
      execFileSync(debianPython, [path.join(referenceDir, 'export_torchscript.py'), dir, pt], { stdio: 'ignore' });
    }
  }
}
