/**
 * The most UTF-8 bytes of input text that one token can stand for, read from a
 * tokenizer.json: a text of B bytes then has at least ceil(B / max) tokens, so
 * a prompt that cannot fit the context is refused without tokenizing it (a
 * huge state would otherwise be tokenized whole first: tens of seconds and
 * gigabytes for a 60 MiB one).
 *
 * The bound must never be too small, so it is given only where it provably
 * holds: BPE models whose tokens each spell fixed text (byte-level, or with
 * byte fallback instead of an unknown token, which could stand for any text),
 * under normalizers whose shrinkage is known. Unicode normalization and
 * lowercasing shrink text at most 3x in UTF-8 (Hangul jamo compose 9 bytes into
 * 3; the Kelvin sign's 3 bytes lowercase to 1). Anything else gives no bound,
 * and prompts are then counted exactly after tokenizing.
 *
 * Measured on the test tokenizers: Qwen3 128 bytes x 3 (NFC) = 384, so 12 MiB
 * of text proves a prompt over 32,768 tokens; Llama 3 128 (4 MiB); Mistral's
 * SentencePiece vocabulary 25 (800 KiB).
 */
import { Buffer } from 'buffer';

interface Part {
  type?: string;
  normalizers?: Part[];
  pretokenizers?: Part[];
  decoders?: Part[];
  pattern?: { String?: string; Regex?: string };
  content?: string;
}

function hasType(part: Part | null | undefined, type: string): boolean {
  if (!part) return false;
  return part.type === type || [...(part.normalizers ?? []), ...(part.pretokenizers ?? []), ...(part.decoders ?? [])].some((p) => hasType(p, type));
}

/** How many times shorter (in UTF-8 bytes) the normalizer can make a text; undefined when unbounded or unknown. */
function shrinkFactor(n: Part | null | undefined): number | undefined {
  if (!n) return 1;
  switch (n.type) {
    case 'Sequence': {
      let factor = 1;
      for (const part of n.normalizers ?? []) {
        const f = shrinkFactor(part);
        if (f === undefined) return undefined;
        factor *= f;
      }
      return factor;
    }
    case 'NFC':
    case 'NFD':
    case 'NFKC':
    case 'NFKD':
    case 'Lowercase':
      return 3;
    case 'Prepend':
      return 1;
    case 'Replace': {
      const from = n.pattern?.String, to = n.content ?? '';
      if (from === undefined || to === '') return undefined;
      return Math.max(1, Buffer.byteLength(from) / Buffer.byteLength(to));
    }
    default:
      return undefined;
  }
}

/** Input bytes a SentencePiece-style piece spells: "▁" is a space, "<0x41>" one byte. */
function pieceBytes(piece: string): number {
  return /^<0x[0-9A-Fa-f]{2}>$/.test(piece) ? 1 : Buffer.byteLength(piece.replace(/\u2581/g, ' '));
}

export function maxBytesPerToken(json: { model?: any; normalizer?: Part | null; pre_tokenizer?: Part | null; decoder?: Part | null; added_tokens?: { content: string }[] }): number | undefined {
  const model = json.model;
  if (!model || model.type !== 'BPE' || typeof model.vocab !== 'object') return undefined;
  const byteLevel = hasType(json.pre_tokenizer, 'ByteLevel') || hasType(json.decoder, 'ByteLevel');
  if (!byteLevel && model.unk_token != null && !model.byte_fallback) return undefined;
  const shrink = shrinkFactor(json.normalizer);
  if (shrink === undefined) return undefined;
  let longest = 1;
  // A byte-level piece spells one byte per character.
  for (const piece of Object.keys(model.vocab)) longest = Math.max(longest, byteLevel ? [...piece].length : pieceBytes(piece));
  for (const t of json.added_tokens ?? []) longest = Math.max(longest, Buffer.byteLength(t.content));
  return longest * shrink;
}
