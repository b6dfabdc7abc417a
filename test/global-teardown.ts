/** After every test: the background node-gyp build stopped if it still runs, and its folder removed. */
import { GYP_BUILD_ENV, removeGypBuild } from './helpers/gyp-build';

export default async function globalTeardown(): Promise<void> {
  const dir = process.env[GYP_BUILD_ENV];
  if (dir) removeGypBuild(dir);
}
