"""The step cost model: a model as ops, compiled to byte and FLOP coefficients (roofline), priced by a
cost mode (the roofline or measured kernel tables, kernels/), memory limits, acceptance, what each
speculation method drafts and verifies, `StepModel.price` (the one place a step's terms are added) and
`Scenario`, the input every analysis takes."""
