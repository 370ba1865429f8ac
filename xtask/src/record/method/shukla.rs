//! Shukla's unbiased per-server variance from four servers up, measured beside the method's
//! (`verdict::two_way`'s docs give why it is not used there): each server's variance
//! `s_g² = (G(G−1) S_g − Σ S) / ((G−1)(G−2) n)`, a difference's `s_i² + s_j²` over K, and its
//! degrees of freedom Satterthwaite's, `n tr(BΣ)²/tr(BΣBΣ)` for the quadratic form B of the
//! difference, both traces estimated without bias from Wishart's moments of the residuals'
//! cross-products W: `E tr(BW)² = n² X + 2n Y`, `E tr(BWBW) = n X + n(n+1) Y`.

use super::beyond::{Case, Noise, RUNS, case, rates};
use super::quoted;
use crate::record::verdict::Estimate;

/// Every server against server 0 with Shukla's variances.
fn shukla(values: &[Vec<Option<f64>>]) -> Vec<Option<Estimate>> {
    let y: Vec<Vec<f64>> = values
        .iter()
        .map(|s| s.iter().map(|v| v.unwrap_or(1.0).ln()).collect())
        .collect();
    let (g, k) = (y.len(), y[0].len());
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let rows: Vec<f64> = y.iter().map(|r| mean(r)).collect();
    let cols: Vec<f64> = (0..k)
        .map(|j| mean(&y.iter().map(|r| r[j]).collect::<Vec<_>>()))
        .collect();
    let grand = mean(&rows);
    let r: Vec<Vec<f64>> = (0..g)
        .map(|i| {
            (0..k)
                .map(|j| y[i][j] - rows[i] - cols[j] + grand)
                .collect()
        })
        .collect();
    let w: Vec<Vec<f64>> = r
        .iter()
        .map(|a| {
            r.iter()
                .map(|b| a.iter().zip(b).map(|(x, y)| x * y).sum())
                .collect()
        })
        .collect();
    let (gf, n) = (g as f64, k as f64 - 1.0);
    let c = (gf - 1.0) * (gf - 2.0);
    let (alpha, beta) = (gf * (gf - 1.0) / c, 1.0 / c);
    let trace_w: f64 = (0..g).map(|h| w[h][h]).sum();
    let trace_w2: f64 = w.iter().flatten().map(|x| x * x).sum();
    (1..g)
        .map(|j| {
            let i = 0;
            // tr(BW) with B = A_i + A_j; B W = α (w_i x_iᵀ + w_j x_jᵀ) − 2β W, x_p = W e_p.
            let tr_bw = alpha * (w[i][i] + w[j][j]) - 2.0 * beta * trace_w;
            if tr_bw <= 0.0 {
                return None;
            }
            let tr_u2 = w[i][i].powi(2) + 2.0 * w[i][j].powi(2) + w[j][j].powi(2);
            let x2: f64 = (0..g).map(|h| w[h][i].powi(2) + w[h][j].powi(2)).sum();
            let tr_bwbw =
                alpha * alpha * tr_u2 - 4.0 * alpha * beta * x2 + 4.0 * beta * beta * trace_w2;
            let a = tr_bw * tr_bw;
            let yy = ((n * tr_bwbw - a) / (n * (n - 1.0) * (n + 2.0))).max(0.0);
            let xx = (a - 2.0 * n * yy) / (n * n);
            let most = n * (gf - 1.0);
            let df = if yy > 0.0 {
                (n * xx / yy).clamp(1.0, most)
            } else {
                most
            };
            Some(Estimate {
                log_ratio: rows[j] - rows[i],
                var: tr_bw / n / k as f64,
                df,
                n: k,
            })
        })
        .collect()
}

#[test]
fn shukla_from_eight_servers_costs_more_power_than_the_bias() {
    let cases: [(&str, Case); 2] = [
        (
            "eight, one noisier, Shukla's",
            case(8, Noise::Model, 3.0, 0.10),
        ),
        (
            "eight, outliers, Shukla's",
            case(8, Noise::Outliers, 1.0, 0.10),
        ),
    ];
    for (k, (name, c)) in cases.into_iter().enumerate() {
        let (false_rate, found) = rates(0x5eed_0880 + k as u64, c, shukla, RUNS);
        let (_, now) = rates(0x5eed_0880 + k as u64, c, super::method, RUNS);
        eprintln!(
            "{name}: false verdicts {false_rate:.4}, found {found:.4}; the method's {now:.4}"
        );
        assert!(
            now > found + 0.1,
            "{name}: the method's {now}, Shukla's {found}"
        );
        quoted(name, &[Some(false_rate), Some(found)], RUNS);
    }
}
