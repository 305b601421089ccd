// The cell under the pointer and the cell clicked (locked until clicked again or Escape) over one
// or more heatmaps of a view; each cell remembers which picture (`which`) it is in.

export class CellSelection {
  /** changed(): redraw the marks and the read-out. */
  constructor(changed) {
    this.hover = null;
    this.lock = null;
    this.changed = changed;
  }

  /** The locked cell, else the hovered one: {which, row, col} or null. */
  get current() {
    return this.lock || this.hover;
  }

  /** onHover / onClick for the Heatmap of picture `which`. */
  on(which) {
    return {
      onHover: (hit) => {
        this.hover = hit ? { which, ...hit } : null;
        this.changed();
      },
      onClick: (hit) => {
        const same = this.lock?.which === which && this.lock.row === hit.row && this.lock.col === hit.col;
        this.lock = same ? null : { which, ...hit };
        this.changed();
      },
    };
  }

  /** Heatmap.setHighlight's marks for picture `which`. */
  highlight(which) {
    const hv = this.hover?.which === which ? this.hover : null;
    const lk = this.lock?.which === which ? this.lock : null;
    return { row: hv?.row, col: hv?.col, lockedRow: lk?.row, lockedCol: lk?.col };
  }

  /** Forget both (new data); with `keep(cell)`, keep a lock it accepts. */
  reset(keep = () => false) {
    this.hover = null;
    if (this.lock && !keep(this.lock)) this.lock = null;
  }

  /** Escape: release the lock. */
  release() {
    this.lock = null;
    this.changed();
  }
}
