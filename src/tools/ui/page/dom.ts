// A few lines instead of a framework: elements are built with text nodes only (never innerHTML), so nothing that
// comes from the wire — a rejection message, a replica URL — can become markup.

type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, value);
  for (const child of children) if (child !== null && child !== undefined && child !== false) el.append(child);
  return el;
}

/** Replaces the children of the element with the given id. */
export function fill(id: string, ...children: Child[]): HTMLElement {
  const el = byId(id);
  el.replaceChildren(...children.filter((c): c is Node | string => c !== null && c !== undefined && c !== false));
  return el;
}

export function byId(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no element #${id}`);
  return el;
}
