/**
 * `node scripts/make-validators.js`, run by the build after tsc (`npm run build`, the tests' global set-up): the
 * request validators of dist/wire/validation.js as code, ajv's standalone output, written beside it with the hash of
 * the schemas they were made from. A server loads them instead of compiling the schemas at every start; where the
 * hash differs (a dist/ compiled since without this step), validation.js compiles the schemas itself.
 */
const fs = require('fs');
const path = require('path');
const Ajv = require('ajv').default;
const standaloneCode = require('ajv/dist/standalone').default;

const wire = path.join(__dirname, '..', 'dist', 'wire');
const { schemas, schemasHash, ajvOptions } = require(path.join(wire, 'validation.js'));
const ajv = new Ajv({ ...ajvOptions, code: { source: true } });
for (const [route, schema] of Object.entries(schemas)) ajv.addSchema(schema, route);
const code = standaloneCode(ajv, Object.fromEntries(Object.keys(schemas).map((route) => [route, route])));
// Written whole under another name, then renamed: a server starting meanwhile reads the old file or the new one.
const file = path.join(wire, 'validators.made.js');
fs.writeFileSync(`${file}.${process.pid}`, `${code}\nexports.schemasHash = ${JSON.stringify(schemasHash)};\n`);
fs.renameSync(`${file}.${process.pid}`, file);
