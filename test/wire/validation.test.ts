/**
 * The request schemas are valid JSON Schema (draft-07, ajv's default): the server compiles them without checking
 * them against the meta-schema (src/wire/validation.ts), so a mistyped keyword or type would otherwise pass unseen.
 * And the validators the build writes as code (scripts/make-validators.js) are the ones dist/ loads, without ajv,
 * telling every problem as the schemas compiled here do.
 */
import Ajv from 'ajv';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { schemas, schemasHash, validate } from '../../src/wire/validation';

const dist = path.resolve(__dirname, '..', '..', 'dist', 'wire');

test.each(Object.keys(schemas))('the %s schema is valid against the meta-schema', (route) => {
  const ajv = new Ajv({ allErrors: true, strict: false });
  expect(ajv.validateSchema(schemas[route as keyof typeof schemas])).toBe(true);
  expect(ajv.errors).toBeNull();
});

test('the check tells a broken schema', () => {
  const ajv = new Ajv({ allErrors: true, strict: false });
  const broken = { ...schemas.answer, properties: { ...schemas.answer.properties, orders: { type: 'numbr' } } };
  expect(ajv.validateSchema(broken)).toBe(false);
});

test("the build's validators are made from these schemas, and dist/ loads them without ajv", () => {
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  expect(require(path.join(dist, 'validators.made.js')).schemasHash).toBe(schemasHash);
  const loaded: string[] = JSON.parse(
    execFileSync(process.execPath, ['-e', `require(${JSON.stringify(path.join(dist, 'validation.js'))}); console.log(JSON.stringify(Object.keys(require.cache)))`], { encoding: 'utf8' }),
  );
  expect(loaded.filter((f) => f.includes(`${path.sep}ajv${path.sep}`))).toEqual([]);
  expect(fs.existsSync(path.join(dist, 'validators.made.js'))).toBe(true);
});

// Each with whether it is valid: every other is told at least one problem.
const bodies: [string, unknown, boolean][] = [
  ['systemone', { state: 'a text', questions: { q: { type: 'noul', instructions: 'Is it?' } } }, true],
  ['systemone', { questions: {} }, false],
  ['systemone', { state: '   ', questions: { q: { type: 'choice' }, r: { type: 'score', criteria: [] }, s: { type: 'other' } } }, false],
  ['systemone', { state: 7, questions: { q: { type: 'choice', criteria: { a: 1 } } }, images: [3], orders: 3 }, false],
  ['systemone', { state: { nested: [1] }, questions: { q: { instructions: 'no type' }, 'a/b~c': { type: 'noul', criteria: { true: 5 } } } }, false],
  ['answer', { state: 'a text', questions: [{ kind: 'choice', options: ['x', 'y'] }] }, true],
  ['answer', { state: '', questions: [] }, false],
  ['answer', { state: 'a text', questions: [{ kind: 'choice' }, { kind: 'score', options: [] }, { kind: 'maybe' }, {}, 'q'] }, false],
  ['answer', 'not an object', false],
];

test.each(bodies)('%s: the made validators tell the same problems as the compiled ones (%j)', (route, body, valid) => {
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const built: typeof import('../../src/wire/validation') = require(path.join(dist, 'validation.js'));
  const problems = validate(route as keyof typeof schemas, body);
  expect(problems.length === 0).toBe(valid);
  expect(built.validate(route as keyof typeof schemas, body)).toEqual(problems);
});
