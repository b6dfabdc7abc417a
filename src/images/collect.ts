/**
 * The images of a main-route request, in the three forms (docs/images.md): data URLs in
 * `images`; `data:image/...;base64,` URIs anywhere inside `state` (in any of its strings); and the
 * files of a multipart/form-data request (fields `image`, `images`, `image[]`). Each comes back with
 * its bytes and where it was, so that an error names it; a data URL that cannot be read is a problem
 * at its location. Nothing is decoded here (inspect.ts reads headers only).
 */
import { Problem } from '../wire/http-error';

export interface ImageInput {
  /** How an error names it: `images.0`, `state image 1`, `file "a.png" (field image)`. */
  name: string;
  loc: (string | number)[];
  bytes: Buffer;
  /** An upload cut off at the size limit: its whole size is unknown. */
  truncated?: boolean;
  /** Where the image engine's prompt puts it: before the state's text (`images`, files), or where it stands in the state. */
  placement: 'leading' | 'state';
}

export interface UploadedFile {
  field: string;
  filename: string;
  bytes: Buffer;
  /** Cut off at the size limit. */
  truncated: boolean;
}

/** A data URI inside a state string: the image type and base64 run (whitespace inside it is not allowed). */
export const STATE_IMAGE = /data:image\/[A-Za-z0-9.+-]+;base64,[A-Za-z0-9+/]*={0,2}/g;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The bytes of a data URL, or why it is not one that can be read. */
export function decodeDataUrl(url: string): { bytes: Buffer } | { problem: string } {
  const m = /^data:([^,]*),/.exec(url);
  if (!m) return { problem: `must be a data URL (data:image/png;base64,...), got ${JSON.stringify(url.slice(0, 40))}${url.length > 40 ? '...' : ''}` };
  const params = m[1].split(';');
  if (!params.slice(1).includes('base64')) return { problem: 'must be a base64 data URL (data:image/...;base64,...)' };
  const data = url.slice(m[0].length).replace(/\s+/g, '');
  if (!BASE64.test(data) || data.length % 4 === 1) return { problem: 'is not valid base64' };
  return { bytes: Buffer.from(data, 'base64') };
}

/** Every string inside `v` (object values and array items, recursively), with its location. */
function* stringsIn(v: unknown, loc: (string | number)[]): Generator<{ text: string; loc: (string | number)[] }> {
  if (typeof v === 'string') yield { text: v, loc };
  else if (Array.isArray(v)) for (const [i, x] of v.entries()) yield* stringsIn(x, [...loc, i]);
  else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) yield* stringsIn(x, [...loc, k]);
}

export function collectImages(body: { images?: unknown; state?: unknown }, files: UploadedFile[] = []): { images: ImageInput[]; problems: Problem[] } {
  const images: ImageInput[] = [], problems: Problem[] = [];
  if (Array.isArray(body.images))
    body.images.forEach((url, i) => {
      const loc = ['body', 'images', i];
      const r = decodeDataUrl(String(url));
      if ('problem' in r) problems.push({ loc, msg: r.problem, type: 'value_error' });
      else images.push({ name: `images.${i}`, loc, bytes: r.bytes, placement: 'leading' });
    });
  let inState = 0;
  for (const { text, loc } of stringsIn(body.state, ['body', 'state'])) {
    for (const m of text.matchAll(STATE_IMAGE)) {
      const r = decodeDataUrl(m[0]);
      const name = `state image ${++inState}`;
      if ('problem' in r) problems.push({ loc, msg: `${name}: ${r.problem}`, type: 'value_error' });
      else images.push({ name, loc, bytes: r.bytes, placement: 'state' });
    }
  }
  files.forEach((f, i) => images.push({ name: `file ${JSON.stringify(f.filename)} (field ${f.field})`, loc: ['body', 'files', i], bytes: f.bytes, truncated: f.truncated, placement: 'leading' }));
  return { images, problems };
}
