// The console's page script loaded in a `vm` context with just enough of a document to run,
// for the checks that need only Node (no browser): diff.mjs and visible.mjs.
import { readFileSync } from 'node:fs';
import vm from 'node:vm';

// Loads the page script at `path`; the context it ran in.
export function loadPage(path) {
  const element = () => ({
    textContent: '', className: '', dataset: {}, appendChild() {}, replaceChildren() {}, addEventListener() {},
  });
  const context = vm.createContext({
    document: {
      querySelector: () => ({ content: 'csrf' }),
      getElementById: element,
      createElement: element,
      createTextNode: (text) => ({ textContent: text }),
    },
    fetch: () => Promise.reject(new Error('no server here')),
    setInterval: () => 0,
  });
  vm.runInContext(readFileSync(path, 'utf8'), context);
  return context;
}
