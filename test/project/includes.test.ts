/**
 * Both builds compile the engine's sources with ATen's header precompiled and included first (CMakeLists.txt,
 * scripts/gyp-build.js), so a source that uses torch without including it still compiles there, and fails in a
 * plain `node-gyp rebuild` or any build without that header. This check stands in for such a build: every file
 * under csrc/ that names torch's namespaces includes one of torch's headers, itself or through the project's
 * headers it includes.
 */
import * as fs from 'fs';
import * as path from 'path';
import { csrc, filesUnder, firstReaching } from '../helpers/source-tree';

/** The text without comments and string literals (a comment may name at:: without using it). */
function code(file: string): string {
  return fs.readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '').replace(/"(?:[^"\\\n]|\\.)*"/g, '""');
}

const TORCH_NAMESPACE = /\b(at|c10|torch)::/;
const TORCH_HEADER = /#include\s*<(ATen|c10|torch)\//;

test('every source that names at::, c10:: or torch:: includes a torch header, itself or through its own includes', () => {
  const all = filesUnder(csrc, /\.(cpp|h)$/);
  const users = all.filter((f) => TORCH_NAMESPACE.test(code(f)));
  expect(users.length).toBeGreaterThan(40);
  expect(users.filter((f) => firstReaching(f, TORCH_HEADER) === null).map((f) => path.relative(csrc, f))).toEqual([]);
});
