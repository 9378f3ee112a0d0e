//! The builtin options tables a TFLite operator carries, as owned values: exactly the
//! tables tract-tflite 0.23 reads (`builtin_options_as_*` in its op builders) plus the
//! ones our rewrites read. Any other table is [`Options::Dropped`]: tract never reads it.

use flatbuffers::{FlatBufferBuilder, UnionWIPOffset, WIPOffset};
use tract_tflite::tflite::{self, ActivationFunctionType as Act, BuiltinOptions as B, Padding};

/// Owned builtin options of one operator.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Options {
    None,
    /// A table tract does not read (its type is kept for diagnostics only).
    Dropped(B),
    Add(Act),
    Sub(Act),
    Mul(Act),
    Div(Act),
    Concatenation {
        axis: i32,
        act: Act,
    },
    Conv2D {
        padding: Padding,
        stride: (i32, i32),
        act: Act,
        dilation: (i32, i32),
    },
    DepthwiseConv2D {
        padding: Padding,
        stride: (i32, i32),
        multiplier: i32,
        act: Act,
        dilation: (i32, i32),
    },
    FullyConnected {
        act: Act,
        weights_format: tflite::FullyConnectedOptionsWeightsFormat,
        keep_num_dims: bool,
    },
    Pool2D {
        padding: Padding,
        stride: (i32, i32),
        filter: (i32, i32),
        act: Act,
    },
    BatchMatMul {
        adj_x: bool,
        adj_y: bool,
    },
    LeakyRelu {
        alpha: f32,
    },
    Reducer {
        keep_dims: bool,
    },
    Reshape {
        new_shape: Option<Vec<i32>>,
    },
    ResizeBilinear {
        align_corners: bool,
        half_pixel_centers: bool,
    },
    ResizeNearest {
        align_corners: bool,
        half_pixel_centers: bool,
    },
    Softmax {
        beta: f32,
    },
    Squeeze {
        dims: Option<Vec<i32>>,
    },
    StridedSlice {
        begin: i32,
        end: i32,
        ellipsis: i32,
        new_axis: i32,
        shrink_axis: i32,
    },
    DepthToSpace {
        block_size: i32,
    },
}

impl Options {
    /// Reads the options of `op`.
    pub fn read(op: &tflite::Operator<'_>) -> Options {
        let kind = op.builtin_options_type();
        let read = || -> Option<Options> {
            Some(match kind {
                B::NONE => Options::None,
                B::AddOptions => Options::Add(
                    op.builtin_options_as_add_options()?
                        .fused_activation_function(),
                ),
                B::SubOptions => Options::Sub(
                    op.builtin_options_as_sub_options()?
                        .fused_activation_function(),
                ),
                B::MulOptions => Options::Mul(
                    op.builtin_options_as_mul_options()?
                        .fused_activation_function(),
                ),
                B::DivOptions => Options::Div(
                    op.builtin_options_as_div_options()?
                        .fused_activation_function(),
                ),
                B::ConcatenationOptions => {
                    let o = op.builtin_options_as_concatenation_options()?;
                    Options::Concatenation {
                        axis: o.axis(),
                        act: o.fused_activation_function(),
                    }
                }
                B::Conv2DOptions => {
                    let o = op.builtin_options_as_conv_2_doptions()?;
                    Options::Conv2D {
                        padding: o.padding(),
                        stride: (o.stride_w(), o.stride_h()),
                        act: o.fused_activation_function(),
                        dilation: (o.dilation_w_factor(), o.dilation_h_factor()),
                    }
                }
                B::DepthwiseConv2DOptions => {
                    let o = op.builtin_options_as_depthwise_conv_2_doptions()?;
                    Options::DepthwiseConv2D {
                        padding: o.padding(),
                        stride: (o.stride_w(), o.stride_h()),
                        multiplier: o.depth_multiplier(),
                        act: o.fused_activation_function(),
                        dilation: (o.dilation_w_factor(), o.dilation_h_factor()),
                    }
                }
                B::FullyConnectedOptions => {
                    let o = op.builtin_options_as_fully_connected_options()?;
                    Options::FullyConnected {
                        act: o.fused_activation_function(),
                        weights_format: o.weights_format(),
                        keep_num_dims: o.keep_num_dims(),
                    }
                }
                B::Pool2DOptions => {
                    let o = op.builtin_options_as_pool_2_doptions()?;
                    Options::Pool2D {
                        padding: o.padding(),
                        stride: (o.stride_w(), o.stride_h()),
                        filter: (o.filter_width(), o.filter_height()),
                        act: o.fused_activation_function(),
                    }
                }
                B::BatchMatMulOptions => {
                    let o = op.builtin_options_as_batch_mat_mul_options()?;
                    Options::BatchMatMul {
                        adj_x: o.adj_x(),
                        adj_y: o.adj_y(),
                    }
                }
                B::LeakyReluOptions => Options::LeakyRelu {
                    alpha: op.builtin_options_as_leaky_relu_options()?.alpha(),
                },
                B::ReducerOptions => Options::Reducer {
                    keep_dims: op.builtin_options_as_reducer_options()?.keep_dims(),
                },
                B::ReshapeOptions => Options::Reshape {
                    new_shape: op
                        .builtin_options_as_reshape_options()?
                        .new_shape()
                        .map(|v| v.iter().collect()),
                },
                B::ResizeBilinearOptions => {
                    let o = op.builtin_options_as_resize_bilinear_options()?;
                    Options::ResizeBilinear {
                        align_corners: o.align_corners(),
                        half_pixel_centers: o.half_pixel_centers(),
                    }
                }
                B::ResizeNearestNeighborOptions => {
                    let o = op.builtin_options_as_resize_nearest_neighbor_options()?;
                    Options::ResizeNearest {
                        align_corners: o.align_corners(),
                        half_pixel_centers: o.half_pixel_centers(),
                    }
                }
                B::SoftmaxOptions => Options::Softmax {
                    beta: op.builtin_options_as_softmax_options()?.beta(),
                },
                B::SqueezeOptions => Options::Squeeze {
                    dims: op
                        .builtin_options_as_squeeze_options()?
                        .squeeze_dims()
                        .map(|v| v.iter().collect()),
                },
                B::StridedSliceOptions => {
                    let o = op.builtin_options_as_strided_slice_options()?;
                    Options::StridedSlice {
                        begin: o.begin_mask(),
                        end: o.end_mask(),
                        ellipsis: o.ellipsis_mask(),
                        new_axis: o.new_axis_mask(),
                        shrink_axis: o.shrink_axis_mask(),
                    }
                }
                B::DepthToSpaceOptions => Options::DepthToSpace {
                    block_size: op.builtin_options_as_depth_to_space_options()?.block_size(),
                },
                other => Options::Dropped(other),
            })
        };
        read().unwrap_or(Options::Dropped(kind))
    }

    /// Writes the options table; returns the union's type tag and value.
    pub fn write(&self, fbb: &mut FlatBufferBuilder<'_>) -> (B, Option<WIPOffset<UnionWIPOffset>>) {
        use tflite::*;
        let (kind, table) = match self {
            Options::None | Options::Dropped(_) => return (B::NONE, None),
            Options::Add(act) => (
                B::AddOptions,
                AddOptions::create(
                    fbb,
                    &AddOptionsArgs {
                        fused_activation_function: *act,
                        pot_scale_int16: false,
                    },
                )
                .as_union_value(),
            ),
            Options::Sub(act) => (
                B::SubOptions,
                SubOptions::create(
                    fbb,
                    &SubOptionsArgs {
                        fused_activation_function: *act,
                        pot_scale_int16: false,
                    },
                )
                .as_union_value(),
            ),
            Options::Mul(act) => (
                B::MulOptions,
                MulOptions::create(
                    fbb,
                    &MulOptionsArgs {
                        fused_activation_function: *act,
                    },
                )
                .as_union_value(),
            ),
            Options::Div(act) => (
                B::DivOptions,
                DivOptions::create(
                    fbb,
                    &DivOptionsArgs {
                        fused_activation_function: *act,
                    },
                )
                .as_union_value(),
            ),
            Options::Concatenation { axis, act } => (
                B::ConcatenationOptions,
                ConcatenationOptions::create(
                    fbb,
                    &ConcatenationOptionsArgs {
                        axis: *axis,
                        fused_activation_function: *act,
                    },
                )
                .as_union_value(),
            ),
            Options::Conv2D {
                padding,
                stride,
                act,
                dilation,
            } => (
                B::Conv2DOptions,
                Conv2DOptions::create(
                    fbb,
                    &Conv2DOptionsArgs {
                        padding: *padding,
                        stride_w: stride.0,
                        stride_h: stride.1,
                        fused_activation_function: *act,
                        dilation_w_factor: dilation.0,
                        dilation_h_factor: dilation.1,
                    },
                )
                .as_union_value(),
            ),
            Options::DepthwiseConv2D {
                padding,
                stride,
                multiplier,
                act,
                dilation,
            } => (
                B::DepthwiseConv2DOptions,
                DepthwiseConv2DOptions::create(
                    fbb,
                    &DepthwiseConv2DOptionsArgs {
                        padding: *padding,
                        stride_w: stride.0,
                        stride_h: stride.1,
                        depth_multiplier: *multiplier,
                        fused_activation_function: *act,
                        dilation_w_factor: dilation.0,
                        dilation_h_factor: dilation.1,
                    },
                )
                .as_union_value(),
            ),
            Options::FullyConnected {
                act,
                weights_format,
                keep_num_dims,
            } => (
                B::FullyConnectedOptions,
                FullyConnectedOptions::create(
                    fbb,
                    &FullyConnectedOptionsArgs {
                        fused_activation_function: *act,
                        weights_format: *weights_format,
                        keep_num_dims: *keep_num_dims,
                        asymmetric_quantize_inputs: false,
                    },
                )
                .as_union_value(),
            ),
            Options::Pool2D {
                padding,
                stride,
                filter,
                act,
            } => (
                B::Pool2DOptions,
                Pool2DOptions::create(
                    fbb,
                    &Pool2DOptionsArgs {
                        padding: *padding,
                        stride_w: stride.0,
                        stride_h: stride.1,
                        filter_width: filter.0,
                        filter_height: filter.1,
                        fused_activation_function: *act,
                    },
                )
                .as_union_value(),
            ),
            Options::BatchMatMul { adj_x, adj_y } => (
                B::BatchMatMulOptions,
                BatchMatMulOptions::create(
                    fbb,
                    &BatchMatMulOptionsArgs {
                        adj_x: *adj_x,
                        adj_y: *adj_y,
                        asymmetric_quantize_inputs: false,
                    },
                )
                .as_union_value(),
            ),
            Options::LeakyRelu { alpha } => (
                B::LeakyReluOptions,
                LeakyReluOptions::create(fbb, &LeakyReluOptionsArgs { alpha: *alpha })
                    .as_union_value(),
            ),
            Options::Reducer { keep_dims } => (
                B::ReducerOptions,
                ReducerOptions::create(
                    fbb,
                    &ReducerOptionsArgs {
                        keep_dims: *keep_dims,
                    },
                )
                .as_union_value(),
            ),
            Options::Reshape { new_shape } => {
                let new_shape = new_shape.as_ref().map(|v| fbb.create_vector(v));
                (
                    B::ReshapeOptions,
                    ReshapeOptions::create(fbb, &ReshapeOptionsArgs { new_shape }).as_union_value(),
                )
            }
            Options::ResizeBilinear {
                align_corners,
                half_pixel_centers,
            } => (
                B::ResizeBilinearOptions,
                ResizeBilinearOptions::create(
                    fbb,
                    &ResizeBilinearOptionsArgs {
                        align_corners: *align_corners,
                        half_pixel_centers: *half_pixel_centers,
                    },
                )
                .as_union_value(),
            ),
            Options::ResizeNearest {
                align_corners,
                half_pixel_centers,
            } => (
                B::ResizeNearestNeighborOptions,
                ResizeNearestNeighborOptions::create(
                    fbb,
                    &ResizeNearestNeighborOptionsArgs {
                        align_corners: *align_corners,
                        half_pixel_centers: *half_pixel_centers,
                    },
                )
                .as_union_value(),
            ),
            Options::Softmax { beta } => (
                B::SoftmaxOptions,
                SoftmaxOptions::create(fbb, &SoftmaxOptionsArgs { beta: *beta }).as_union_value(),
            ),
            Options::Squeeze { dims } => {
                let squeeze_dims = dims.as_ref().map(|v| fbb.create_vector(v));
                (
                    B::SqueezeOptions,
                    SqueezeOptions::create(fbb, &SqueezeOptionsArgs { squeeze_dims })
                        .as_union_value(),
                )
            }
            Options::StridedSlice {
                begin,
                end,
                ellipsis,
                new_axis,
                shrink_axis,
            } => (
                B::StridedSliceOptions,
                StridedSliceOptions::create(
                    fbb,
                    &StridedSliceOptionsArgs {
                        begin_mask: *begin,
                        end_mask: *end,
                        ellipsis_mask: *ellipsis,
                        new_axis_mask: *new_axis,
                        shrink_axis_mask: *shrink_axis,
                    },
                )
                .as_union_value(),
            ),
            Options::DepthToSpace { block_size } => (
                B::DepthToSpaceOptions,
                DepthToSpaceOptions::create(
                    fbb,
                    &DepthToSpaceOptionsArgs {
                        block_size: *block_size,
                    },
                )
                .as_union_value(),
            ),
        };
        (kind, Some(table))
    }
}
