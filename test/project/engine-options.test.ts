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
  expect(read('cli/calls_json.cpp')).toContain('engine_info_json(');
  for (const file of ['addon/js_values.cpp', 'cli/calls_json.cpp', 'cli/main.cpp']) expect(read(file)).not.toMatch(/"cacheBytes"|"kvCacheBytes"|"linearBytes"/);
});

/** The names for_each_engine_option gives, in order (csrc/engine/named_fields.h). */
function listedOptions(): { name: string; field: string }[] {
  return Array.from(read('engine/named_fields.h').matchAll(/visit\("(\w+)", o\.(\w+)\)/g), (m) => ({ name: m[1], field: m[2] }));
}

test('every engine option is named once, in one list that the addon and tq_cli both read', () => {
  const listed = listedOptions();
  // Each field of EngineOptions, each once.
  expect(listed.map((o) => o.field).sort()).toEqual(structFields(read('engine/engine_options.h'), 'EngineOptions').sort());
  expect(new Set(listed.map((o) => o.name)).size).toBe(listed.length);
  // Each name a field of load()'s options in TypeScript, and none of those left out.
  const native = fs.readFileSync(path.resolve(csrc, '..', 'src', 'engine', 'native.ts'), 'utf8');
  const loadOptions = native.slice(native.indexOf('export interface NativeLoadOptions {'));
  const tsFields = Array.from(loadOptions.slice(0, loadOptions.indexOf('\n}')).matchAll(/^ {2}(\w+)\??:/gm), (m) => m[1]);
  expect(tsFields.sort()).toEqual(listed.map((o) => o.name).sort());
  // Both readers go through the list; neither names an option field itself.
  for (const file of ['addon/js_values.cpp', 'cli/flags.cpp']) {
    expect(read(file)).toContain('for_each_engine_option(');
    expect(read(file)).not.toMatch(/\bo(pts)?\.(block_size|cache_mib|max_step_tokens|prefix_cache|batch_invariant)\b/);
  }
});

test("a request's optional fields are named once, in one list that the addon and tq_cli both read", () => {
  const fields = read('engine/named_fields.h');
  expect(Array.from(fields.matchAll(/visit\("(\w+)", [rq]\./g), (m) => m[1])).toEqual(['wantHidden', 'cacheSalt', 'readoutIndex', 'temperature']);
  for (const file of ['addon/js_values.cpp', 'cli/calls_json.cpp']) {
    expect(read(file)).toContain('for_each_request_field(');
    expect(read(file)).toContain('for_each_question_field(');
    expect(read(file).replace(/\/\/.*$/gm, '')).not.toMatch(/"(wantHidden|cacheSalt|readoutIndex|temperature)"/); // comments aside
  }
});
