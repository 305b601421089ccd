// The uint8 codes of circuitwidgets.transport (CODE_MAX and NAN_CODE there): codes 0..CODE_MAX
// span a payload's [lo, hi], NAN_CODE marks NaN or masked cells. A module of its own so that the
// colour tables (scales.js) need not import decode.js, which imports the colour scales.

export const CODE_MAX = 254;
export const NAN_CODE = 255;
