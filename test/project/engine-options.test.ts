/**
 * An engine option is declared once per hop (docs/build.md, "Adding an engine option"): the paged model's options
 * nest the kernel stack's (csrc/kernels/kernel_stack.h) instead of repeating their fields, and the engine's info has
 * one serializer (csrc/engine/engine_info_json.cpp) that the addon and tq_cli both call.
 */
import * as fs from 'fs';
import * as path from 'path';

const csrc = path.resolve(__dirname, '..', '..', 'csrc');
const read = (rel: string) => fs.readFileSync(path.join(csrc, rel), 'utf8');

/** The field names of `struct name { ... };` in `text` (one declaration per line, as the project writes them). */
export function structFields(text: string, name: string): string[] {
  const body = text.slice(text.indexOf(`struct ${name} {`));
  const end = body.indexOf('\n};');
  return body
    .slice(0, end)
    .split('\n')
    .slice(1)
    .map((line) => line.replace(/\/\/.*$/, '').trim())
    .filter((line) => line.endsWith(';') && !line.includes('('))
    .map((line) => line.replace(/\s*=.*;$|;$/, '').split(/\s+/).pop()!);
}

test('the paged model options nest the kernel stack options, and share no field with them', () => {
  const stack = structFields(read('kernels/kernel_stack.h'), 'KernelStackOptions');
  const paged = structFields(read('runner/paged_model.h'), 'PagedModelOptions');
  expect(stack).toEqual(expect.arrayContaining(['device', 'dtype', 'quantization', 'isa', 'fixed_shapes']));
  expect(paged).toContain('kernels');
  expect(read('runner/paged_model.h')).toMatch(/^\s*KernelStackOptions kernels;/m);
  expect(paged.filter((f) => stack.includes(f))).toEqual([]);
});

test('the field reader sees a struct as written, defaults and comments aside', () => {
  const text = 'struct A {\n  int x = 1;  // a comment; with a semicolon\n  std::string y;\n  void f();\n};\nstruct B {\n  int z;\n};';
  expect(structFields(text, 'A')).toEqual(['x', 'y']);
});

test("the engine's info is written by one serializer, which the addon and tq_cli call", () => {
  expect(read('addon/js_values.cpp')).toContain('engine_info_json(');
  expect(read('cli/main.cpp')).toContain('engine_info_json(');
  for (const file of ['addon/js_values.cpp', 'cli/main.cpp']) expect(read(file)).not.toMatch(/"cacheBytes"|"kvCacheBytes"|"linearBytes"/);
});
