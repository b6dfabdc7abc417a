/** The state as text: a string as is, an object as `key: value` lines, an array item by item. */

function renderValue(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function renderObject(o: Record<string, unknown>): string {
  return Object.entries(o)
    .map(([k, v]) => `${k}: ${renderValue(v)}`)
    .join('\n');
}

export function renderState(state: unknown): string {
  if (typeof state === 'string') return state;
  if (Array.isArray(state))
    return state.map((item) => (item !== null && typeof item === 'object' && !Array.isArray(item) ? renderObject(item as Record<string, unknown>) : renderValue(item))).join('\n');
  if (state !== null && typeof state === 'object') return renderObject(state as Record<string, unknown>);
  return renderValue(state);
}

/**
 * An option description, a noul side or a score level as text: the format lets
 * each be a string, an object or an array ("entries"); null or absent is none.
 */
export function renderEntry(entry: unknown): string | null {
  return entry === null || entry === undefined ? null : renderValue(entry);
}

/** Instructions as text: blank or absent gives the type's default; objects and arrays are compact JSON. */
export function renderInstructions(instructions: unknown, fallback: string): string {
  if (instructions === undefined || instructions === null) return fallback;
  if (typeof instructions === 'string') return instructions.trim() === '' ? fallback : instructions;
  return JSON.stringify(instructions);
}
