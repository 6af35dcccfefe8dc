// The API of on-exit-leak-free 2 (pino's exit-flush registry; the package ships no types). Node's
// ESM loader exposes a CommonJS module.exports as the default export.
declare module 'on-exit-leak-free' {
  type Callback<T extends object> = (obj: T, event: 'exit' | 'beforeExit') => void;
  const onExit: {
    /** Calls `fn(obj)` on process exit while `obj` is alive (held by a WeakRef). */
    register<T extends object>(obj: T, fn: Callback<T>): void;
    /** Calls `fn(obj)` when the event loop runs empty ('beforeExit') while `obj` is alive. */
    registerBeforeExit<T extends object>(obj: T, fn: Callback<T>): void;
    unregister(obj: object): void;
  };
  export default onExit;
}
