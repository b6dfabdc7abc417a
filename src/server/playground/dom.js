// One helper for building elements: properties are set as properties, except `role`, `aria-*`
// and `data-*`, which are attributes (what assistive technology and the tests read).

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === 'role' || key.includes('-')) node.setAttribute(key, value);
    else node[key] = value;
  }
  node.append(...children);
  return node;
}
