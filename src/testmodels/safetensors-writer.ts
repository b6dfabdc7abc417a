/** Writes .safetensors files (F32, BF16 or F16) from Float32Array tensors. */
import * as fs from 'fs';

export type StoredDtype = 'F32' | 'BF16' | 'F16';

/** A tensor to write; `make` produces its values only when it is written, to bound memory. */
export interface NamedTensor {
  name: string;
  shape: number[];
  make: () => Float32Array;
}

const bytesPer: Record<StoredDtype, number> = { F32: 4, BF16: 2, F16: 2 };

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Round-to-nearest-even truncation of an fp32 bit pattern to bf16. */
function toBf16(v: number): number {
  f32[0] = v;
  const bits = u32[0];
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** IEEE half precision, round to nearest even (values here are far from overflow). */
function toF16(v: number): number {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1))) half++;
  return sign | half;
}

function encode(data: Float32Array, dtype: StoredDtype): Buffer {
  if (dtype === 'F32') return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint16Array(data.length);
  const conv = dtype === 'BF16' ? toBf16 : toF16;
  for (let i = 0; i < data.length; i++) out[i] = conv(data[i]);
  return Buffer.from(out.buffer);
}

export function writeSafetensors(file: string, tensors: NamedTensor[], dtype: StoredDtype): void {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const t of tensors) {
    const size = t.shape.reduce((a, b) => a * b, 1) * bytesPer[dtype];
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8); // data section starts 8-byte aligned
  const fd = fs.openSync(file, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    fs.writeSync(fd, len);
    fs.writeSync(fd, Buffer.from(json, 'utf8'));
    for (const t of tensors) fs.writeSync(fd, encode(t.make(), dtype));
  } finally {
    fs.closeSync(fd);
  }
}
