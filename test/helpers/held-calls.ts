import type { Db } from 'mongodb';

// A store call held until released: for tests that force two store rounds to interleave.

/**
 * `db` whose collection `name` holds the `nth` call of `method` until `release`, after calling
 * `held`. The store is the real one; only the moment a command leaves is chosen.
 */
export function holdingCall(db: Db, name: string, method: 'bulkWrite' | 'insertMany', nth: number, held: () => void, release: Promise<void>): Db {
  const bind = (target: object, member: unknown) => (typeof member === 'function' ? (member as (...a: unknown[]) => unknown).bind(target) : member);
  return new Proxy(db, {
    get(target, prop) {
      if (prop !== 'collection') return bind(target, Reflect.get(target, prop, target));
      return (collectionName: string) => {
        const col = target.collection(collectionName);
        if (collectionName !== name) return col;
        let calls = 0;
        return new Proxy(col, {
          get(c, p) {
            if (p !== method) return bind(c, Reflect.get(c, p, c));
            return async (...args: unknown[]) => {
              if (++calls === nth) {
                held();
                await release;
              }
              return (c[method] as (...a: unknown[]) => Promise<unknown>)(...args);
            };
          },
        });
      };
    },
  });
}

/** A gate: `held` resolves when the call is held, `release()` lets it go. */
export function gate() {
  let onHeld!: () => void;
  const held = new Promise<void>((resolve) => (onHeld = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  return { onHeld, held, release, released };
}

