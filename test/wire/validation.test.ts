/**
 * The request schemas are valid JSON Schema (draft-07, ajv's default): the server compiles them without checking
 * them against the meta-schema (src/wire/validation.ts), so a mistyped keyword or type would otherwise pass unseen.
 */
import Ajv from 'ajv';
import { schemas } from '../../src/wire/validation';

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
