/**
 * Request validation with ajv. Unknown fields are allowed at every level; the
 * first error becomes a `detail` that names the field and says what to send.
 */
import Ajv, { ErrorObject } from 'ajv';

const nonBlank = { type: 'string', pattern: '\\S' };
const instructions = { type: ['string', 'object', 'array', 'null'] };

const systemoneSchema = {
  type: 'object',
  required: ['state', 'questions'],
  properties: {
    model: { type: 'string' },
    state: { anyOf: [nonBlank, { type: 'object' }, { type: 'array' }] },
    questions: {
      type: 'object',
      minProperties: 1,
      additionalProperties: {
        type: 'object',
        required: ['type'],
        properties: { type: { enum: ['noul', 'choice', 'score'] }, instructions },
        allOf: [
          {
            if: { properties: { type: { const: 'noul' } } },
            then: { properties: { criteria: { type: 'object', properties: { true: { type: ['string', 'null'] }, false: { type: ['string', 'null'] } } } } },
          },
          {
            if: { properties: { type: { const: 'choice' } } },
            then: { required: ['criteria'], properties: { criteria: { type: 'object', minProperties: 1, additionalProperties: { type: ['string', 'null'] } } } },
          },
          {
            if: { properties: { type: { const: 'score' } } },
            then: { required: ['criteria'], properties: { criteria: { type: 'array', minItems: 1, items: { type: 'string' } } } },
          },
        ],
      },
    },
    images: { type: 'array', items: { type: 'string' } },
    orders: { enum: [1, 2, true, false] },
  },
};

const answerSchema = {
  type: 'object',
  required: ['state', 'questions'],
  properties: {
    state: { anyOf: [nonBlank, { type: 'object' }, { type: 'array' }] },
    questions: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['kind'],
        properties: {
          kind: { enum: ['noul', 'choice', 'score'] },
          instructions,
          options: { type: 'array', minItems: 1, items: { type: 'string' } },
          descriptions: { type: 'array', items: { type: ['string', 'null'] } },
        },
        allOf: [{ if: { properties: { kind: { enum: ['choice', 'score'] } } }, then: { required: ['options'] } }],
      },
    },
    orders: { enum: [1, 2, true, false] },
  },
};

const ajv = new Ajv({ allErrors: false, strict: false });
const validators = { systemone: ajv.compile(systemoneSchema), answer: ajv.compile(answerSchema) };

const article = (t: string) => (t === 'null' ? 'null' : t === 'object' || t === 'array' || t === 'integer' ? `an ${t}` : `a ${t}`);

function where(e: ErrorObject): string {
  const parts = e.instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  return parts.length ? 'body.' + parts.join('.') : 'body';
}

function describe(e: ErrorObject): string {
  const at = where(e);
  const p = e.params as Record<string, any>;
  switch (e.keyword) {
    case 'required':
      return `${at === 'body' ? 'body' : at}: missing required field "${p.missingProperty}"`;
    case 'type':
      return `${at} must be ${String(p.type).split(',').map(article).join(' or ')}`;
    case 'enum':
      return `${at} must be one of ${p.allowedValues.map((v: unknown) => JSON.stringify(v)).join(', ')}`;
    case 'minProperties':
      return `${at} must have at least ${p.limit} ${p.limit === 1 ? 'entry' : 'entries'}`;
    case 'minItems':
      return `${at} must have at least ${p.limit} ${p.limit === 1 ? 'item' : 'items'}`;
    case 'pattern':
      return `${at} must not be blank`;
    case 'anyOf':
      return `${at} must be a non-blank string, an object or an array`;
    default:
      return `${at} ${e.message}`;
  }
}

export function validate(kind: keyof typeof validators, body: unknown): string | undefined {
  const v = validators[kind];
  if (v(body)) return undefined;
  // if/then failures report the inner error first; skip ajv's summary "must match then schema".
  const errors = (v.errors ?? []).filter((e) => e.keyword !== 'if');
  return describe(errors[0]);
}
