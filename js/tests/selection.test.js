// Hover and click-to-lock over a view's heatmaps.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CellSelection } from "../lib/selection.js";

test("a click locks a cell, a second click on it releases; hover shows under the lock", () => {
  let redraws = 0;
  const cells = new CellSelection(() => redraws++);
  const tokens = cells.on("tokens");
  tokens.onHover({ row: 1, col: 2 });
  assert.deepEqual(cells.current, { which: "tokens", row: 1, col: 2 });
  tokens.onClick({ row: 3, col: 0 });
  tokens.onHover({ row: 4, col: 4 });
  assert.deepEqual(cells.current, { which: "tokens", row: 3, col: 0 }); // the lock wins
  assert.deepEqual(cells.highlight("tokens"), { row: 4, col: 4, lockedRow: 3, lockedCol: 0 });
  assert.deepEqual(cells.highlight("positions"), { row: undefined, col: undefined, lockedRow: undefined, lockedCol: undefined });
  cells.on("positions").onClick({ row: 3, col: 0 }); // the same cell of another picture: a new lock
  assert.equal(cells.lock.which, "positions");
  cells.on("positions").onClick({ row: 3, col: 0 });
  assert.equal(cells.lock, null);
  assert.equal(redraws, 5);
});

test("reset keeps a lock only when told to; release forgets it", () => {
  const cells = new CellSelection(() => {});
  cells.on("ov").onClick({ row: 5, col: 5 });
  cells.reset((lock) => lock.row < 10);
  assert.equal(cells.lock.row, 5);
  cells.reset((lock) => lock.row < 3);
  assert.equal(cells.lock, null);
  cells.on("ov").onClick({ row: 1, col: 1 });
  cells.release();
  assert.equal(cells.current, null);
});
