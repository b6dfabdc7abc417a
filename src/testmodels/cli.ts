/** `npm run testmodels -- [name ...]`: generate test models (default: the tiny ones). */
import { generateTestModel } from './generate';
import { tinyModelNames } from './specs';

const names = process.argv.slice(2).length ? process.argv.slice(2) : tinyModelNames;
for (const name of names) {
  const t0 = Date.now();
  const dir = generateTestModel(name);
  console.log(`${name}: ${dir} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}
