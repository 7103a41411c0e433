"""The data mechanisms: pure computations that run a release on data and describe it.

Each function takes data (a DataFrame or an array) and an rng, and returns its
output with a frozen record of the mechanism parameters and the guarantee
they certify. Nothing here reads or writes files or the store.

  noise.py           random source; geometric, Laplace, Gaussian noise; counts,
                     crosstabs, clipped sums and means (sensitivity per relation)
  tan.py             Tan's Algorithm 1: noisy tables with exact margins, and the
                     exact privacy loss of one row
  ppercent.py        p%, frequency and dominance rules; Bailie's p% mechanism
  attribute.py       Zhang et al.'s attribute-private Gaussian mechanism
  subsampling.py     Clifton et al.'s Theorem 2: subsampling without replacement
  sample_privacy.py  perfect sample privacy: leakage, optimal mappings, joint leakage
  errors.py          MechanismInputError(field, message) for bad input
"""
