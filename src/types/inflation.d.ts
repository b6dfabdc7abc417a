/** inflation ships no types: it returns the request, or a zlib stream decompressing it per Content-Encoding. */
declare module 'inflation' {
  import { IncomingMessage } from 'http';
  import { Readable } from 'stream';
  export default function inflate(req: IncomingMessage, options?: object): Readable;
}
