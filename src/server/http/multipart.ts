/**
 * multipart/form-data bodies of the main route (docs/images.md): the `request` field holds
 * the JSON body, the `image`, `images` or `image[]` fields hold image files. Parsed by busboy from
 * the body already read (so the body's size limit and decompression apply), in memory: no
 * temporary file is ever written. A file is cut at one byte over the image size limit (reported
 * by the image checks); more files than images allowed stop the parse.
 */
import Busboy from 'busboy';
import { UploadedFile } from '../../images/collect';
import { IMAGE_LIMITS } from '../../images/formats';
import { invalid } from '../../wire/http-error';

export const IMAGE_FIELDS = ['image', 'images', 'image[]'];

export interface MultipartBody {
  /** The `request` field's text. */
  request: string;
  files: UploadedFile[];
}

export function parseMultipart(headers: Record<string, string | string[] | undefined>, body: Buffer): Promise<MultipartBody> {
  return new Promise((resolve, reject) => {
    let parser: Busboy.Busboy;
    try {
      parser = Busboy({ headers: headers as Busboy.BusboyConfig['headers'], limits: { files: IMAGE_LIMITS.maxImages, fileSize: IMAGE_LIMITS.maxBytes + 1, fields: 8, parts: 16 } });
    } catch (e) {
      return reject(invalid(['body'], `not a readable multipart/form-data body: ${(e as Error).message}`));
    }
    let request: string | undefined;
    const files: UploadedFile[] = [];
    const fail = (msg: string) => reject(invalid(['body'], msg));
    parser.on('field', (name, value) => {
      if (name === 'request') request = value;
    });
    parser.on('file', (field, stream, info) => {
      const chunks: Buffer[] = [];
      const file: UploadedFile = { field, filename: info.filename ?? '(no name)', bytes: Buffer.alloc(0), truncated: false };
      if (!IMAGE_FIELDS.includes(field)) {
        stream.resume();
        return fail(`the file ${JSON.stringify(file.filename)} is in the field ${JSON.stringify(field)}: send images in ${IMAGE_FIELDS.map((f) => `"${f}"`).join(', ')}`);
      }
      files.push(file);
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('limit', () => (file.truncated = true));
      stream.on('close', () => (file.bytes = Buffer.concat(chunks)));
    });
    parser.on('filesLimit', () => fail(`more than ${IMAGE_LIMITS.maxImages} image files: a request may have at most ${IMAGE_LIMITS.maxImages}`));
    parser.on('partsLimit', () => fail('too many parts: a request field and at most 2 image files'));
    parser.on('fieldsLimit', () => fail('too many fields: a request field and at most 2 image files'));
    parser.on('error', (e: Error) => fail(`not a readable multipart/form-data body: ${e.message}`));
    parser.on('close', () => {
      if (request === undefined) return fail('a multipart/form-data request needs a "request" field holding the JSON body');
      resolve({ request, files });
    });
    parser.end(body);
  });
}
