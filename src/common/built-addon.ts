/**
 * Where a native addon of this project was built: cmake-js with Ninja writes build/<name>.node, with Make
 * build/Release/<name>.node, node-gyp build/Release/<name>.node. The most recently built one wins.
 */
import * as fs from 'fs';
import * as path from 'path';
import { projectRoot } from './project-root';

export function addonCandidates(name: string): string[] {
  return [`build/${name}.node`, `build/Release/${name}.node`];
}

/** The newest build of addon `name`, or undefined when none is built. */
export function builtAddon(name: string): string | undefined {
  return addonCandidates(name)
    .map((rel) => path.join(projectRoot, rel))
    .filter((file) => fs.existsSync(file))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
}
