import type { AgreementLevel } from '../../shared/agreement.js';

/**
 * Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: the reliability
 * data matrix of 4 observers (rows) × 12 units (columns), values 1-5, a missing value as null.
 */
export const KRIPPENDORFF_2011_C: readonly (readonly (number | null)[])[] = [
  /* A */ [1, 2, 3, 3, 2, 1, 4, 1, 2, null, null, null],
  /* B */ [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, null, 3],
  /* C */ [null, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, null],
  /* D */ [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, null],
];

/** The α the paper publishes for that matrix, to three decimals. */
export const KRIPPENDORFF_2011_C_ALPHA: Readonly<Record<AgreementLevel, number>> = { nominal: 0.743, ordinal: 0.815, interval: 0.849, ratio: 0.797 };
