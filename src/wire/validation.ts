/**
 * Request validation with ajv, reporting every problem as `{loc, msg, type}`
 * (the format's 422 convention). Unknown fields are allowed at every level.
 *
 * Text fields the model reads ("entries": instructions, option descriptions,
 * noul's true/false, score levels) may be strings, objects or arrays, as the
 * official clients send them; non-strings are rendered as compact JSON. Their
 * nesting is limited to MAX_DEPTH levels: JSON.stringify recurses, and ~4,500
 * levels overflowed the stack (a 500) before this check existed.
 *
 * A question's type-specific rules apply only once its `type` (or `kind`) is
 * present, so a question without one is told exactly that.
 */
import type { ErrorObject } from 'ajv';
import { createHash } from 'crypto';
import { Problem } from './http-error';

/** Levels of objects and arrays allowed inside the fields the model reads. */
export const MAX_DEPTH = 256;

const entry = { type: ['string', 'object', 'array'] };
const optionalEntry = { type: ['string', 'object', 'array', 'null'] };
const state = { type: ['string', 'object', 'array'], if: { type: 'string' }, then: { pattern: '\\S' } };
const whenType = (field: string, value: string, then: object) => ({ if: { required: [field], properties: { [field]: { const: value } } }, then });

const systemoneSchema = {
  type: 'object',
  required: ['state', 'questions'],
  properties: {
    model: { type: 'string' },
    state,
    questions: {
      type: 'object',
      minProperties: 1,
      additionalProperties: {
        type: 'object',
        required: ['type'],
        properties: { type: { enum: ['noul', 'choice', 'score'] }, instructions: optionalEntry },
        allOf: [
          whenType('type', 'noul', { properties: { criteria: { type: ['object', 'null'], properties: { true: optionalEntry, false: optionalEntry } } } }),
          whenType('type', 'choice', { required: ['criteria'], properties: { criteria: { type: 'object', minProperties: 1, additionalProperties: optionalEntry } } }),
          whenType('type', 'score', { required: ['criteria'], properties: { criteria: { type: 'array', minItems: 1, items: entry } } }),
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
    state,
    questions: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['kind'],
        properties: {
          kind: { enum: ['noul', 'choice', 'score'] },
          instructions: optionalEntry,
          options: { type: 'array', minItems: 1, items: { type: 'string' } },
          descriptions: { type: 'array', items: optionalEntry },
        },
        allOf: [whenType('kind', 'choice', { required: ['options'] }), whenType('kind', 'score', { required: ['options'] })],
      },
    },
    orders: { enum: [1, 2, true, false] },
  },
};

/** The request bodies' schemas, by route. */
export const schemas = { systemone: systemoneSchema, answer: answerSchema };
type Route = keyof typeof schemas;

// The schemas are the constants above, checked against JSON Schema's meta-schema by test/wire/validation.test.ts
// rather than at every start.
export const ajvOptions = { allErrors: true, strict: false, validateSchema: false };
/** What the validators are made from: the build's copy (below) is used only where it says the same. */
export const schemasHash = createHash('sha256').update(JSON.stringify([schemas, ajvOptions])).digest('hex');

type Validator = ((body: unknown) => boolean) & { errors?: ErrorObject[] | null };

/**
 * The build writes the validators as code beside this file (scripts/make-validators.js, ajv's standalone output): a
 * server loads them rather than compiling the schemas with ajv at every start (bench/README.md, "Where a start's time
 * goes"). Compiled here where there is no such file (run from src/) or it was made from other schemas.
 */
function loadValidators(): Record<Route, Validator> {
  try {
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    const made = require('./validators.made');
    if (made.schemasHash === schemasHash) return made;
  } catch {
    // not built: compiled below
  }
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const ajv = new (require('ajv').default)(ajvOptions);
  return { systemone: ajv.compile(schemas.systemone), answer: ajv.compile(schemas.answer) };
}
const validators = loadValidators();

const typeNames: Record<string, [string, string]> = {
  string: ['a string', 'string_type'],
  object: ['an object', 'dict_type'],
  array: ['an array', 'list_type'],
  null: ['null', 'none_required'],
  integer: ['an integer', 'int_type'],
  number: ['a number', 'float_type'],
  boolean: ['a boolean', 'bool_type'],
};

/** `loc` of an error: array indexes as numbers, object keys as strings (as FastAPI reports them). */
function locOf(e: ErrorObject, body: unknown): (string | number)[] {
  const loc: (string | number)[] = ['body'];
  let node: any = body;
  for (const raw of e.instancePath.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    const step = Array.isArray(node) ? Number(part) : part;
    loc.push(step);
    node = node !== null && typeof node === 'object' && Object.hasOwn(node, step) ? node[step] : undefined;
  }
  return loc;
}

function toProblem(e: ErrorObject, body: unknown): Problem {
  const loc = locOf(e, body);
  const p = e.params as Record<string, any>;
  switch (e.keyword) {
    case 'required':
      return { loc: [...loc, p.missingProperty], msg: `missing required field "${p.missingProperty}"`, type: 'missing' };
    case 'type': {
      const types = String(p.type).split(',');
      return { loc, msg: `must be ${types.map((t) => typeNames[t]?.[0] ?? t).join(' or ')}`, type: types.length === 1 ? typeNames[types[0]]?.[1] ?? 'type_error' : 'type_error' };
    }
    case 'enum':
      return { loc, msg: `must be one of ${p.allowedValues.map((v: unknown) => JSON.stringify(v)).join(', ')}`, type: 'literal_error' };
    case 'minProperties':
      return { loc, msg: `must have at least ${p.limit} ${p.limit === 1 ? 'entry' : 'entries'}`, type: 'too_short' };
    case 'minItems':
      return { loc, msg: `must have at least ${p.limit} ${p.limit === 1 ? 'item' : 'items'}`, type: 'too_short' };
    case 'pattern':
      return { loc, msg: 'must not be blank', type: 'string_too_short' };
    default:
      return { loc, msg: e.message ?? 'is not valid', type: 'value_error' };
  }
}

/**
 * The deepest nesting of objects and arrays in `value`, counted without
 * recursion (the value may be nested far deeper than the stack allows).
 */
export function nestingDepth(value: unknown): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return deepest;
}

/** The fields the model reads, with their locations: those whose nesting is limited. */
function renderedFields(kind: Route, body: any): [(string | number)[], unknown][] {
  const fields: [(string | number)[], unknown][] = [[['body', 'state'], body.state]];
  const questions: [string | number, any][] = kind === 'systemone' ? Object.entries(body.questions) : body.questions.map((q: unknown, i: number) => [i, q]);
  for (const [name, q] of questions) {
    fields.push([['body', 'questions', name, 'instructions'], q.instructions]);
    fields.push([['body', 'questions', name, kind === 'systemone' ? 'criteria' : 'descriptions'], kind === 'systemone' ? q.criteria : q.descriptions]);
  }
  return fields;
}

/** Every problem with `body`, in the order a person would fix them; empty when it is valid. */
export function validate(kind: Route, body: unknown): Problem[] {
  const v = validators[kind];
  if (!v(body)) {
    const errors = (v.errors ?? []).filter((e) => e.keyword !== 'if');
    const problems: Problem[] = [];
    const seen = new Set<string>();
    for (const e of errors) {
      const problem = toProblem(e, body);
      const key = JSON.stringify(problem.loc) + problem.msg;
      if (!seen.has(key)) problems.push(problem);
      seen.add(key);
    }
    return problems;
  }
  const problems: Problem[] = [];
  for (const [loc, value] of renderedFields(kind, body)) {
    const depth = nestingDepth(value);
    if (depth > MAX_DEPTH) problems.push({ loc, msg: `is nested ${depth} levels deep; at most ${MAX_DEPTH} levels of objects and arrays are allowed`, type: 'value_error' });
  }
  return problems;
}
