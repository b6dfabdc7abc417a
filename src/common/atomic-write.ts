/** Replacing a file whole or not at all, so that a reader (another replica sharing --tasks-file) never sees half of it. */
import * as fs from 'fs';
import * as path from 'path';

/** Writes `content` to a temporary file beside `file`, syncs it, renames it over `file`, then syncs the folder. */
export async function writeAtomically(file: string, content: string) {
  const dir = path.dirname(path.resolve(file));
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.tmp`);
  const handle = await fs.promises.open(tmp, 'w');
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.promises.rename(tmp, file);
  const d = await fs.promises.open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}
